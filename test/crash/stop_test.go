package crash_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestSIGTERMLeavesNothingPending: a worker stopped with SIGTERM under a backlog leaves no entry
// pending under its name: the sends it began finish and are recorded, and what it read and had
// not sent goes back at once. With a visibility timeout of 10 minutes, another worker could take
// over a forgotten entry only after that; here it delivers every job within the test's minutes,
// each exactly once, since a clean stop is no crash.
func TestSIGTERMLeavesNothingPending(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t, clusterOptions{visibility: 10 * time.Minute})
	// Every answer takes a second, half the grace period: the sends in flight at the stop end
	// within it, and a worker that held more than it had started could not send the rest.
	for _, p := range pushsim.Providers() {
		if err := c.sim.SetFault(p, pushsim.Fault{Kind: pushsim.Slow, Delay: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	const jobs = 600
	lines, ids := c.jobs(jobs)
	ctx := context.Background()
	if _, err := c.producer.Enqueue(ctx, lines...); err != nil {
		t.Fatal(err)
	}
	rdb := c.redis.Client(t)
	results := stream.KeysFor("", 0).Results

	a := c.spawn()
	waitFor(t, "the first worker's first 50 records", func() bool { return rdb.XLen(ctx, results).Val() >= 50 })
	if err := a.Stop(0); err != nil {
		t.Fatalf("worker exit after SIGTERM: %v", err)
	}
	done := rdb.XLen(ctx, results).Val()
	if done >= jobs {
		t.Fatalf("every job was recorded before the stop: no backlog to stop under")
	}
	if left := pendingEntries(t, c); len(left) > 0 {
		t.Fatalf("after SIGTERM, entries pending under the stopped worker: %v", left)
	}
	t.Logf("%d of %d jobs recorded before the stop; nothing left pending", done, jobs)

	for _, p := range pushsim.Providers() {
		if err := c.sim.SetFault(p, pushsim.Fault{}); err != nil {
			t.Fatal(err)
		}
	}
	c.startWorker()
	c.requireOneRecordEach(ids, 2*time.Minute)
	if dups, _ := c.duplicates(); dups != 0 {
		t.Errorf("%d jobs sent twice around a clean stop, want none", dups)
	}
}

// pendingEntries are the pending counts of every stream of shard 0 that has any, by key.
func pendingEntries(t *testing.T, c *cluster) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	rdb := c.redis.Client(t)
	keys, err := rdb.Keys(ctx, "wp:{0}:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]int64{}
	for _, k := range keys {
		if rdb.Type(ctx, k).Val() != "stream" {
			continue
		}
		p, err := rdb.XPending(ctx, k, stream.Group).Result()
		if err != nil {
			if strings.Contains(err.Error(), "NOGROUP") {
				continue // a record stream: no group of ours reads it
			}
			t.Fatal(err)
		}
		if p.Count > 0 {
			left[k] = p.Count
		}
	}
	return left
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling Redis for a state
	}
}
