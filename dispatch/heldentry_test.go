package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// TestEntryHeldByItsLiveWorkerIsNeverCountedAsADelivery: an entry its worker, alive, holds
// far longer than the visibility timeout (a send that takes 2s against a 300ms timeout) is not
// claimed again by that worker's own reclaimer and counted as another delivery each time: it
// stays at one delivery and is sent once, with no TOO_MANY_DELIVERIES dead record.
func TestEntryHeldByItsLiveWorkerIsNeverCountedAsADelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{
		"fcm": "timeout: 6s\nresponse_header_timeout: 5s"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 2 * time.Second})
	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 300 * time.Millisecond
	cfg.MaxDeliveries = 2
	runWorker(t, e, cfg)
	// The reclaimer starts once Redis has answered for stale_after + every (1.2s): the send
	// starts after that, and it runs every 20ms while the send takes six visibility timeouts.
	time.Sleep(1300 * time.Millisecond)
	e.enqueue(job("held", sub, "x"))
	waitFor(t, "the send in flight", func() bool { return e.sim.Stats().InFlight == 1 })
	time.Sleep(time.Second)
	lane := e.store.Keys(0).Lane("fcm")
	rdb := e.redis.Client(t)
	p, err := rdb.XPendingExt(context.Background(), &redis.XPendingExtArgs{Stream: lane, Group: "gateway", Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(p) != 1 {
		t.Errorf("pending entries of the lane during the send: %v, %v; want the one held", p, err)
	}
	for _, x := range p {
		if x.RetryCount != 1 {
			t.Errorf("entry %s of %s, held by its live worker: %d deliveries, want 1", x.ID, x.Consumer, x.RetryCount)
		}
	}
	if r := e.waitRecord("results", "held"); r["code"] != "ACCEPTED" {
		t.Errorf("held: %v, want ACCEPTED", r)
	}
	if d := e.all("dead"); len(d) != 0 {
		t.Errorf("dead records: %v, want none", d)
	}
	if n := len(e.deliveriesOf("held")); n != 1 {
		t.Errorf("pushsim saw %d requests for the held job, want 1", n)
	}
}

// TestEntryBehindASlotWaitIsRecheckedFromItsRead: the entries of one read start one by one,
// and each may wait for a slot behind the ones before it. How long an entry has waited here,
// which decides whether its delivery asks Redis that it is still ours before it sends, counts
// from the read, not from its own start: the second entry of a read that waited past the
// visibility timeout, while another replica took both over, is not sent by this one either.
func TestEntryBehindASlotWaitIsRecheckedFromItsRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{registry: testRegistry(map[string]string{"fcm": "max_in_flight: 1"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 400 * time.Millisecond
	ls := e.newLaneSet(cfg)
	l := ls.byShard[0]["fcm"]
	e.laneEntry("fcm", 0, job("first", sub, "x"))
	e.laneEntry("fcm", 0, job("second", sub, "x"))
	// The provider's one slot, taken by its lane on another shard.
	if err := l.lim.slots.TryAcquire(false, ""); err != nil {
		t.Fatal(err)
	}
	readAt := time.Now()
	entries, err := e.store.ReadLane(context.Background(), 0, "fcm", jobfmt.ClassTransactional, 2, 0)
	if err != nil || len(entries) != 2 {
		t.Fatalf("ReadLane: %d entries, %v", len(entries), err)
	}
	tookOver := make(chan struct{})
	go func() {
		defer close(tookOver)
		// This replica looked dead to another for a moment (a late heartbeat): past the
		// visibility timeout, w2 takes both idle entries over; then the slot comes free.
		time.Sleep(cfg.VisibilityTimeout + 50*time.Millisecond)
		w2 := e.newStore("w2")
		if got, _, err := w2.Reclaim(context.Background(), 0, entries[0].Stream, cfg.VisibilityTimeout, 10, 0, nil); err != nil || len(got) != 2 {
			t.Errorf("w2 Reclaim: %d entries, %v", len(got), err)
		}
		l.lim.slots.Release(false, "")
	}()
	// As the reader does: the whole read held, then each entry started in turn.
	for _, en := range entries {
		l.hold(en, readAt)
	}
	for _, en := range entries {
		if !l.startDelivery(context.Background(), context.Background(), en, false, readAt) {
			t.Fatal("startDelivery refused an entry")
		}
	}
	l.inflight.Wait()
	<-tookOver
	for _, id := range []string{"first", "second"} {
		if n := len(e.deliveriesOf(id)); n != 0 {
			t.Errorf("%s: pushsim saw %d requests from w1 for an entry w2 took over; want 0", id, n)
		}
	}
}
