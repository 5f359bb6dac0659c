// Package simtest is what tests that send through the push service simulator share: a pushsim
// run for one test and closed when it ends, and the VAPID key a worker signs with. It is apart
// from testkit because it imports pushsim and vapid, whose own tests use testkit.
package simtest

import (
	"testing"

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
