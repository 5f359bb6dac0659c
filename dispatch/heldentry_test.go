package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
