package dispatch

import (
	"strconv"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

func TestShutdownLetsInFlightSendsFinish(t *testing.T) {
	e := newEnv(t, envOptions{fcmInFlight: 2})
	sub := e.subscribe(pushsim.FCM, e.key)
	const delay = 1500 * time.Millisecond
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: delay})
	var ids []string
	for i := range 6 {
		id := "slow-" + strconv.Itoa(i)
		ids = append(ids, id)
		e.enqueue(job(id, sub, "x"))
	}
	w := e.start(e.config(e.store)) // Grace 10 s
	lane := e.store.LaneStream(0, "fcm")
	waitFor(t, "every job in the lane, two sends in flight", func() bool {
		return e.xlen(lane) == int64(len(ids)) && e.sim.Stats().InFlight == 2
	})

	began := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if took := time.Since(began); took > delay+3*time.Second {
		t.Errorf("shutdown took %v; the sends in flight needed at most %v", took, delay)
	}
	ledger := e.all("results")
	if len(ledger) != 2 {
		t.Fatalf("%d ledger records after shutdown, want the 2 sends that were in flight: %v", len(ledger), ledger)
	}
	for _, r := range ledger {
		if r["code"] != "ACCEPTED" {
			t.Errorf("in-flight send recorded %v, want ACCEPTED", r)
		}
	}
	if n, p := e.xlen(lane), e.pending(lane); n != 4 || p != 0 {
		t.Errorf("lane holds %d entries, %d pending; want the 4 never started, unread", n, p)
	}
	if n := len(e.sim.Deliveries()); n != 2 {
		t.Errorf("pushsim saw %d requests, want 2", n)
	}

	// Another replica takes the rest.
	setFault(t, e, pushsim.FCM, pushsim.Fault{})
	e.start(e.config(e.newStore("w2")))
	waitFor(t, "every job recorded", func() bool { return len(e.all("results")) == len(ids) })
	for _, id := range ids {
		if r := e.one("results", id); r["code"] != "ACCEPTED" {
			t.Errorf("%s: %v", id, r)
		}
		if n := len(e.deliveriesOf(id)); n != 1 {
			t.Errorf("%s: pushsim saw %d requests, want 1", id, n)
		}
	}
}

func TestShutdownCancelsSendsWhenGraceEnds(t *testing.T) {
	e := newEnv(t, envOptions{fcmInFlight: 2})
	sub := e.subscribe(pushsim.FCM, e.key)
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 8 * time.Second})
	e.enqueue(job("cut-0", sub, "x"), job("cut-1", sub, "y"))
	cfg := e.config(e.store)
	cfg.Grace = 200 * time.Millisecond
	w := e.start(cfg)
	waitFor(t, "two sends in flight", func() bool { return e.sim.Stats().InFlight == 2 })

	began := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if took := time.Since(began); took > cfg.Grace+3*time.Second {
		t.Errorf("shutdown took %v with a grace of %v", took, cfg.Grace)
	}
	if ledger := e.all("results"); len(ledger) != 0 {
		t.Errorf("cancelled sends were recorded: %v", ledger)
	}
	lane := e.store.LaneStream(0, "fcm")
	if p := e.pending(lane); p != 2 {
		t.Errorf("%d lane entries pending, want the 2 cut short", p)
	}

	// They stay pending for another replica, which reclaims and delivers them.
	setFault(t, e, pushsim.FCM, pushsim.Fault{})
	cfg = e.config(e.newStore("w2"))
	cfg.VisibilityTimeout = 100 * time.Millisecond
	e.start(cfg)
	for _, id := range []string{"cut-0", "cut-1"} {
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" || r["attempt"] != "0" {
			t.Errorf("%s: %v", id, r)
		}
	}
	waitFor(t, "lane drained", func() bool { return e.queuesEmpty() && e.pending(lane) == 0 })
}

func TestIdleShutdownWaitsAtMostOneBlock(t *testing.T) {
	e := newEnv(t, envOptions{shards: 2})
	cfg := e.config(e.store)
	cfg.Block = time.Second
	// Long periods: a loop that waited for its next tick instead of the stop would show.
	cfg.PromoteEvery, cfg.ReclaimEvery, cfg.JanitorEvery = time.Hour, time.Hour, time.Hour
	w := e.start(cfg)
	waitFor(t, "the worker running", func() bool { return e.logs.String() != "" })
	began := time.Now()
	if err := w.stop(); err != nil {
		t.Fatalf("Run returned %v, want nil", err)
	}
	if took := time.Since(began); took > cfg.Block+time.Second {
		t.Errorf("idle shutdown took %v; reads block at most %v", took, cfg.Block)
	}
}
