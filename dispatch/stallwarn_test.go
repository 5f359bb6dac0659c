package dispatch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// secondSendWarning is the warning a worker logs when an accepted push may have gone out twice.
const secondSendWarning = "the push may have gone out twice"

// TestRedisStallWarnsOfNoSecondSend: Redis stalls (DEBUG SLEEP, longer than the client's read
// timeout) while accepted pushes wait to be recorded, so each outcome write times out and is
// tried again, and the first try runs once Redis wakes. Every job went out once (pushsim's count
// of requests per job), has one ledger record, and no "may have gone out twice" warning is
// logged for it: the warning count equals the jobs pushsim really received more than once.
func TestRedisStallWarnsOfNoSecondSend(t *testing.T) {
	e := newEnv(t, envOptions{wallClock: true, redis: []redistest.Option{redistest.WithConfig("enable-debug-command", "yes")}})
	const n = 4
	sub := e.subscribe(pushsim.FCM, e.key)
	// Held long enough that the sleep below is under way when the answers come.
	if err := e.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		id := fmt.Sprintf("stalled-%d", i)
		ids = append(ids, id)
		e.enqueue(job(id, sub, "once "+id))
	}
	// A read timeout shorter than the stall: each write that meets it times out and is tried
	// again, while Redis runs the first try when it wakes.
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: e.redis.Addr(), ReadTimeout: time.Second})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	store := stream.New(client(), client(), stream.Options{Prefix: prefix, Shards: e.shards, Consumer: "w1"})
	t.Cleanup(func() { store.Close() })
	w := e.start(e.config(store))
	waitFor(t, "every push in flight at pushsim", func() bool { return e.sim.Stats().InFlight == n })
	slept := make(chan error, 1)
	go func() { slept <- e.redis.Client(t).Do(context.Background(), "DEBUG", "SLEEP", "3").Err() }()
	if err := <-slept; err != nil {
		t.Fatalf("DEBUG SLEEP: %v", err)
	}
	waitFor(t, "a ledger record of every job", func() bool { return len(e.all("results")) >= n })
	if err := w.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	logs := e.logs.String()
	// An outcome write that met the stall finds its entry gone when it is answered: either way
	// of telling so is logged, or the stall came too late and the test shows nothing.
	if !strings.Contains(logs, secondSendWarning) && !strings.Contains(logs, "an earlier try of it, whose reply was lost, recorded it") {
		t.Fatalf("no outcome write met the stall:\n%s", logs)
	}
	twice := 0
	for _, id := range ids {
		got := len(e.deliveriesOf(id))
		if got > 1 {
			twice++
		}
		if got != 1 {
			t.Errorf("pushsim received %s %d times, want once", id, got)
		}
		if rs := e.byID("results")[id]; len(rs) != 1 || rs[0]["code"] != "ACCEPTED" {
			t.Errorf("ledger records of %s: %v; want one ACCEPTED", id, rs)
		}
	}
	if warned := strings.Count(logs, secondSendWarning); warned != twice {
		t.Errorf("%d %q warnings for %d jobs pushsim received more than once", warned, secondSendWarning, twice)
	}
}

// TestSecondSendAfterTakeoverIsWarned: while a slow send is in flight, another consumer takes
// its entry over, sends the job and ends it. The first send is accepted after that: pushsim
// received the job twice, and the warning is logged once.
func TestSecondSendAfterTakeoverIsWarned(t *testing.T) {
	e := newEnv(t, envOptions{wallClock: true})
	ctx := context.Background()
	sub := e.subscribe(pushsim.FCM, e.key)
	raw := job("taken", sub, "twice")
	e.laneEntry("fcm", 0, raw)
	read, _, err := e.store.ReadLanes(ctx, 0, "fcm", stream.LaneRead{Total: 1})
	if err != nil || len(read) != 1 {
		t.Fatalf("ReadLane: %d entries, %v", len(read), err)
	}
	// The fault decides a request as it arrives: the first send is held, the second is not.
	if err := e.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	set := e.newLaneSet(e.config(e.store))
	first := set.byShard[0]["fcm"]
	set.begin(t, first, read[0])
	waitFor(t, "the first send in flight at pushsim", func() bool { return e.sim.Stats().InFlight == 1 })
	if err := e.sim.SetFault(pushsim.FCM, pushsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	// w2's reclaimer took the first consumer for gone and handed the entry back; w2 reads it.
	otherStore := e.newStore("w2")
	if n, err := otherStore.Requeue(ctx, 0, read[0].Stream, stream.Requeue{Count: 10}); err != nil || n.Entries != 1 {
		t.Fatalf("w2 Requeue: %+v, %v", n, err)
	}
	got, _, err := otherStore.ReadLanes(ctx, 0, "fcm", stream.LaneRead{Total: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("w2 ReadLane: %d entries, %v", len(got), err)
	}
	otherSet := e.newLaneSet(e.config(otherStore))
	second := otherSet.byShard[0]["fcm"]
	otherSet.begin(t, second, got[0])
	second.inflight.Wait()
	first.inflight.Wait()

	if n := len(e.deliveriesOf("taken")); n != 2 {
		t.Fatalf("pushsim received the job %d times; the test needs both sends", n)
	}
	if rs := e.byID("results")["taken"]; len(rs) != 1 {
		t.Errorf("ledger records: %v; want the second consumer's one", rs)
	}
	if warned := strings.Count(e.logs.String(), secondSendWarning); warned != 1 {
		t.Errorf("%d %q warnings for a job pushsim received twice; want 1", warned, secondSendWarning)
	}
}
