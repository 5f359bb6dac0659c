package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// ghostRead makes consumer "ghost" read every intake entry and then die: the entries stay
// pending under its name.
func ghostRead(t *testing.T, e *env, want int) *stream.Store {
	t.Helper()
	ghost := e.newStore("ghost")
	if err := ghost.Setup(context.Background(), []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	got, err := ghost.ReadIntake(context.Background(), 0, 100, 0)
	if err != nil || len(got) != want {
		t.Fatalf("ghost read %d intake entries (%v), want %d", len(got), err, want)
	}
	return ghost
}

func TestReclaimedIntakeEntriesAreHandledLikeFreshOnes(t *testing.T) {
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.enqueue(job("orphan-good", sub, "x"), job("orphan-bad", sub, "x", "ttl", -1))
	ghostRead(t, e, 2)

	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 50 * time.Millisecond
	e.start(cfg)
	if r := e.waitRecord("results", "orphan-good"); r["code"] != "ACCEPTED" {
		t.Errorf("orphan-good: %v", r)
	}
	if d := e.waitRecord("dead", "orphan-bad"); d["code"] != "INVALID_JOB" || d["reason"] != "ttl: must be at least 0, got -1" {
		t.Errorf("orphan-bad: %v", d)
	}
	if p := e.pending(e.store.IntakeStream(0)); p != 0 {
		t.Errorf("%d intake entries still pending", p)
	}
}

func TestEntriesDeliveredTooOftenGoToDead(t *testing.T) {
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.enqueue(job("cursed", sub, "x"))
	ghostRead(t, e, 1)

	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 50 * time.Millisecond
	cfg.MaxDeliveries = 1 // the ghost's read was the one delivery allowed
	e.start(cfg)
	d := e.waitRecord("dead", "cursed")
	if d["code"] != stream.CodeTooManyDeliveries || d["reason"] != "delivered 1 times without finishing" {
		t.Errorf("dead record %v", d)
	}
	if n := len(e.deliveriesOf("cursed")); n != 0 {
		t.Errorf("pushsim saw %d requests, want 0", n)
	}
}

func TestJanitorRemovesOnlyIdleConsumersWithNothingPending(t *testing.T) {
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.enqueue(job("held", sub, "x"))
	ghostRead(t, e, 1) // "ghost" holds the entry
	idle := e.newStore("idle")
	if _, err := idle.ReadIntake(context.Background(), 0, 1, 0); err != nil { // joins, reads nothing
		t.Fatal(err)
	}
	in := e.store.IntakeStream(0)

	cfg := e.config(e.store)
	cfg.JanitorIdle = 50 * time.Millisecond
	cfg.VisibilityTimeout = time.Hour // keep the ghost's entry where it is
	e.start(cfg)
	waitFor(t, "the idle consumer removed", func() bool { return !slices.Contains(e.consumers(in), "idle") })
	if cs := e.consumers(in); !slices.Contains(cs, "ghost") {
		t.Errorf("consumers %v: the ghost, which still has an entry pending, was removed", cs)
	}
	if p := e.pending(in); p != 1 {
		t.Errorf("%d entries pending, want the ghost's 1", p)
	}
}

func TestTTLZeroIsSentOnceAndNeverRetried(t *testing.T) {
	e := newEnv(t, envOptions{})
	fcm := e.subscribe(pushsim.FCM, e.key)
	apple := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	// Enqueued a second ago: any queueing at all would expire a TTL-0 job under "remaining <= 0".
	at := e.clock.Now().Add(-time.Second).UnixMilli()
	e.enqueue(job("now-or-never", fcm, "x", "ttl", 0, "enqueued_at", at), job("never", apple, "x", "ttl", 0))
	e.start(e.config(e.store))

	if r := e.waitRecord("results", "now-or-never"); r["code"] != "ACCEPTED" {
		t.Errorf("now-or-never: %v", r)
	}
	if ds := e.deliveriesOf("now-or-never"); len(ds) != 1 || ds[0].TTL != 0 {
		t.Errorf("pushsim saw %d requests, want one with TTL 0", len(ds))
	}
	if r := e.waitRecord("results", "never"); r["code"] != "EXPIRED" || r["attempt"] != "0" {
		t.Errorf("never: %v, want EXPIRED instead of a retry", r)
	}
}
