package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

const proxySecret = "tunn3l-pa55word"

// TestRunThroughAProxy runs the worker with --proxy and --proxy-credentials-file: a job goes
// through the proxy to pushsim, status and the metrics name the proxy, and the password is in
// no log line, no status and no metric.
func TestRunThroughAProxy(t *testing.T) {
	key := vapidtest.NewKey(t)
	sim, sub, _ := sendTarget(t, "fcm", key.PublicKey())
	px := proxytest.Start(t, proxytest.Config{User: "gw", Password: proxySecret})
	creds := filepath.Join(t.TempDir(), "proxy-credentials")
	if err := os.WriteFile(creds, []byte("gw:"+proxySecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, []string{"run", "--http", httpAddr, "--redis", srv.URL(), "--subject", "mailto:ops@example.com",
			"--log-level", "debug", "--grace", "1s", "--block", "100ms", "--vapid-key", key.SEC1PEM(),
			"--proxy", px.URL(), "--proxy-credentials-file", creds}, &stdout, &stderr)
	}()
	subJSON, _ := json.Marshal(sub)
	if _, err := stream.NewProducer(srv.Client(t), stream.DefaultPrefix, 1).Enqueue(ctx,
		[]byte(`{"id":"via-proxy","subscription":`+string(subJSON)+`,"payload":"through the tunnel"}`)); err != nil {
		t.Fatal(err)
	}
	results := stream.KeysFor(stream.DefaultPrefix, 0).Results
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, _ := srv.Client(t).XLen(ctx, results).Result(); n > 0 {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("run exited %d:\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ledger record within 30s:\n%s", stderr.String())
		}
	}
	if ds := sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 || string(ds[0].Plaintext) != "through the tunnel" || px.Connects() != 1 {
		t.Fatalf("pushsim saw %d deliveries, the proxy %d CONNECTs; want one of each", len(ds), px.Connects())
	}

	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	for _, want := range []string{
		`webpush_proxy_up{proxy="` + px.Addr() + `"} 1`,
		`webpush_proxy_tunnels_total{proxy="` + px.Addr() + `"} 1`,
		`webpush_provider_proxy{provider="fcm",proxy="` + px.Addr() + `"} 1`,
		`webpush_proxy_breaker_state{proxy="` + px.Addr() + `"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	var status string
	for time.Now().Before(deadline) { // the heartbeat publishes the proxy
		_, status, _ = run(t, "status", "--redis", srv.URL())
		if strings.Contains(status, "egress proxies") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(status, px.Addr()+"  closed") || !strings.Contains(status, "apple,autopush,fallback,fcm,wns") {
		t.Errorf("status does not show the proxy, its breaker and its providers:\n%s", status)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `"proxy":"`+px.Addr()+`"`) {
		t.Errorf("the start line does not name the proxy:\n%s", stderr.String())
	}
	for what, text := range map[string]string{"log": stderr.String(), "stdout": stdout.String(), "status": status, "metrics": metrics} {
		if strings.Contains(text, proxySecret) {
			t.Errorf("%s carries the proxy password", what)
		}
	}
}

func TestRunRefusesBadProxyFlags(t *testing.T) {
	srv := redistest.Start(t)
	key := vapidtest.NewKey(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--proxy", "socks5://gw:" + proxySecret + "@p.example:1080"}, "--proxy: want an http:// or https:// proxy URL"},
		{[]string{"--proxy", "env"}, "--proxy: env: HTTPS_PROXY is not set"},
		{[]string{"--proxy-credentials-file", "/nonexistent"}, "--proxy-credentials-file: given without a proxy"},
	} {
		t.Setenv("HTTPS_PROXY", "")
		t.Setenv("https_proxy", "")
		args := append([]string{"run", "--http", "", "--redis", srv.URL(), "--subject", "mailto:ops@example.com", "--vapid-key", key.SEC1PEM()}, tc.args...)
		code, _, stderr := run(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, proxySecret) {
			t.Errorf("%q: exit %d, %q; want 2 and %q, no password", tc.args, code, stderr, tc.want)
		}
	}
}
