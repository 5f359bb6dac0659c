package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// TestReloadChangesLimitsAndAddsProviders: a reload while jobs are in flight changes a
// provider's rate, in-flight cap and breaker, routes a newly listed host to its new provider's
// lanes, drops no send in flight, and refuses to remove a provider, keeping the table in force.
func TestReloadChangesLimitsAndAddsProviders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{registry: testRegistry(nil)})
	apple := e.subscribe(pushsim.Apple, e.key)
	selfHosted := e.subscribeAt(pushsim.Generic, genericHost, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Slow, Delay: time.Second})
	w, err := New(e.config(e.store))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	go func() { done <- w.Run(ctx) }()
	e.enqueue(job("in-flight", apple, "x"))
	waitFor(t, "the apple send in flight", func() bool { return e.sim.Stats().InFlight == 1 })

	next := testRegistry(map[string]string{
		"apple": "rate: 7\nburst: 2\nmax_in_flight: 3\nbreaker: {min_samples: 50}",
	}) + "  - id: selfhosted\n    kind: generic\n    hosts: [" + genericHost + "]\n"
	reg, err := providers.Parse("registry.yaml", []byte(next))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(context.Background(), reg, e.senderFor(reg)); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	pl := w.limits.get("apple")
	if got := pl.tokens.Rate(); got != 7 {
		t.Errorf("apple's rate after the reload = %g, want 7", got)
	}
	if got := pl.slots.Cap(); got != 3 {
		t.Errorf("apple's in-flight cap after the reload = %d, want 3", got)
	}
	if got := pl.provider().Breaker.MinSamples; got != 50 {
		t.Errorf("apple's breaker min_samples after the reload = %d, want 50", got)
	}
	if r := e.waitRecord("results", "in-flight"); r["code"] != "ACCEPTED" {
		t.Errorf("the send in flight during the reload: %v, want ACCEPTED", r)
	}
	if n := len(e.deliveriesOf("in-flight")); n != 1 {
		t.Errorf("pushsim saw %d requests for the job in flight, want 1", n)
	}

	// The newly listed host goes to its own provider's lane, which the reload started.
	e.enqueue(job("routed", selfHosted, "x"))
	if r := e.waitRecord("results", "routed"); r["code"] != "ACCEPTED" || r["provider"] != "selfhosted" {
		t.Errorf("routed: %v, want ACCEPTED through selfhosted", r)
	}

	// Removing a provider is refused, and the table in force stays.
	shrunk, err := providers.Parse("registry.yaml", []byte(testRegistry(nil)))
	if err != nil {
		t.Fatal(err)
	}
	err = w.Reload(context.Background(), shrunk, nil)
	if !errors.Is(err, ErrReloadRefused) || !strings.Contains(err.Error(), "selfhosted") {
		t.Errorf("Reload without selfhosted = %v; want a refusal naming it", err)
	}
	if _, ok := w.cfg.registry().Provider("selfhosted"); !ok {
		t.Error("the refused reload replaced the registry")
	}
	if !strings.Contains(e.logs.String(), "dispatch: registry reloaded") {
		t.Error("no log line for the reload")
	}
}
