package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// runWorker starts a Worker of cfg and returns it once it runs; the test's end stops it.
func runWorker(t *testing.T, e *env, cfg Config) *Worker {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "the worker running", func() bool { return w.running.Load() })
	return w
}

// TestReloadRaisingTheRateRetimesATokenWait: a job waiting in its lane for the provider's next
// token at 0.1/s (ten seconds) goes out within a second of a reload that raises the rate to
// 100/s: a raised rate applies to the jobs already waiting, not only to the ones read after it.
func TestReloadRaisingTheRateRetimesATokenWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{"fcm": "rate: 0.1\nburst: 1"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	w := runWorker(t, e, e.config(e.store))
	e.enqueue(job("first", sub, "x"))
	if r := e.waitRecord("results", "first"); r["code"] != "ACCEPTED" {
		t.Fatalf("first: %v, want ACCEPTED", r)
	}
	e.enqueue(job("second", sub, "x"))
	pl := w.limits.get("fcm")
	lane := e.store.Keys(0).Lane("fcm")
	waitFor(t, "the second job waiting in its lane, unread", func() bool { return e.xlen(lane) == 1 && e.pending(lane) == 0 })

	reg, err := providers.Parse("registry.yaml", []byte(testRegistry(map[string]string{"fcm": "rate: 100\nburst: 1"})))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(context.Background(), reg, e.senderFor(reg)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	reloaded := time.Now()
	deadline := reloaded.Add(time.Second)
	for len(e.byID("results")["second"]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the job waiting for its token was not sent within 1s of the reload to 100/s (rate in force %g)", pl.tokens.Rate())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r := e.one("results", "second"); r["code"] != "ACCEPTED" {
		t.Errorf("second: %v, want ACCEPTED", r)
	}
	t.Logf("sent %s after the reload", time.Since(reloaded).Round(time.Millisecond))
}
