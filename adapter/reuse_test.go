package adapter_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// countingProxy forwards TCP connections to target and counts them: how many connections the
// senders opened.
func countingProxy(t *testing.T, target string) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String(), conns
}

const reuseRegistry = `
version: 1
defaults:
  tls_timeout: 5s
providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
    rate: 100
  - id: apple
    hosts: [web.push.apple.com]
  - id: fallback
    kind: generic
`

// A Sender built for a reloaded registry takes over the connections of the one it replaces
// where a provider's connection settings are unchanged, and opens new ones where they changed;
// retiring the old Sender leaves the connections the new one took over open.
func TestSenderReusesConnectionsAcrossReloads(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	proxy, conns := countingProxy(t, h.sim.Addr())
	connectTo, err := adapter.ParseConnectTo([]string{"fcm.googleapis.com:443=" + proxy})
	if err != nil {
		t.Fatal(err)
	}
	build := func(content string, reuse *adapter.Sender) *adapter.Sender {
		t.Helper()
		reg, err := providers.Parse("registry.yaml", []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		s, err := adapter.NewSender(adapter.Config{Registry: reg, Signer: h.signer, ConnectTo: connectTo, RootCAs: h.sim.CertPool(), Reuse: reuse})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	sub := h.subscribe(t, pushsim.FCM)
	send := func(s *adapter.Sender, wantConns int64, step string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out := s.Send(ctx, &adapter.Message{Subscription: sub, Payload: []byte("hi"), TTL: 60, Key: h.key}); out.Code != taxonomy.Accepted {
			t.Fatalf("%s: %s %s", step, out.Code, out.Detail)
		}
		if got := conns.Load(); got != wantConns {
			t.Fatalf("%s: %d connections opened in all, want %d", step, got, wantConns)
		}
	}

	first := build(reuseRegistry, nil)
	send(first, 1, "first sender")
	rateOnly := build(strings.Replace(reuseRegistry, "rate: 100", "rate: 50", 1), first)
	first.Retire(rateOnly)
	send(rateOnly, 1, "after a reload that changed a rate")
	newTLS := build(strings.Replace(reuseRegistry, "tls_timeout: 5s", "tls_timeout: 4s", 1), rateOnly)
	rateOnly.Retire(newTLS)
	send(newTLS, 2, "after a reload that changed the TLS timeout")
}

// A message that names a provider is sent, and answered, as that provider's, whatever its
// endpoint resolves to now: the lane a job was routed to before a reload moved its host.
func TestMessageNamesItsProvider(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	sub := h.subscribe(t, pushsim.Generic)
	out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("hi"), TTL: 60, Provider: "fcm"})
	if out.Provider != "fcm" {
		t.Errorf("sent as %q, want fcm, the provider the message names", out.Provider)
	}
	if out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("hi"), TTL: 60}); out.Provider != "fallback" {
		t.Errorf("without a name, sent as %q, want fallback (the endpoint's)", out.Provider)
	}
}
