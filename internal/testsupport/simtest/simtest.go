// Package simtest is what tests that send through the push service simulator share: a pushsim
// run for one test and closed when it ends, the VAPID key a worker signs with, and a Sender
// whose connections go to the simulator. It is apart from the other test helpers because it imports pushsim,
// vapid and adapter, whose own tests use those helpers.
package simtest

import (
	"net"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Start runs pushsim with cfg until the test ends, its CA file in a directory of the test's own
// unless cfg.Dir names one. A Close that fails fails the test.
func Start(t testing.TB, cfg pushsim.Config) *pushsim.Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := pushsim.Start(cfg)
	if err != nil {
		t.Fatalf("pushsim.Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pushsim Close: %v", err)
		}
	})
	return s
}

// VAPIDKey is a fresh VAPID key named "default", the name a worker gives a --vapid-key without
// NAME=.
func VAPIDKey(t testing.TB) *vapid.Key {
	t.Helper()
	k, err := vapid.GenerateKey("default")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Sender is a Sender for reg, signing as mailto:ops@example.com, that sends the requests for
// every host sim serves, and for each of hosts (port 443: generic push services), to sim and
// trusts its CA. It is closed when the test ends.
func Sender(t testing.TB, sim *pushsim.Server, reg *providers.Registry, hosts ...string) *adapter.Sender {
	t.Helper()
	return SenderVia(t, sim, reg, nil, hosts...)
}

// SenderVia is Sender with every provider's connections through proxy (nil: direct).
func SenderVia(t testing.TB, sim *pushsim.Server, reg *providers.Registry, proxy *adapter.Proxy, hosts ...string) *adapter.Sender {
	t.Helper()
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: "mailto:ops@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	specs := sim.ConnectTo()
	for _, h := range hosts {
		specs = append(specs, net.JoinHostPort(h, "443")+"="+sim.Addr())
	}
	ct, err := adapter.ParseConnectTo(specs)
	if err != nil {
		t.Fatal(err)
	}
	s, err := adapter.NewSender(adapter.Config{Registry: reg, Signer: signer, ConnectTo: ct, RootCAs: sim.CertPool(), Proxy: proxy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
