package crash_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestWorkersKilledLoseNeitherClass: half the jobs bulk, half transactional, over every
// provider, and workers SIGKILLed while both classes flow. Every job of both classes ends with
// exactly one record: a bulk job's entries (in its lane, pending for a killed worker, waiting
// to retry) are reclaimed and recorded as a transactional job's are.
func TestWorkersKilledLoseNeitherClass(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t)
	const jobs, kills = 1200, 6
	lines, ids := c.jobs(jobs)
	for i := range lines {
		if i%2 == 1 {
			var m map[string]any
			if err := json.Unmarshal(lines[i], &m); err != nil {
				t.Fatal(err)
			}
			m["class"] = "bulk"
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			lines[i] = b
		}
	}
	c.startWorkers(crashWorkers)
	fed := c.feed(lines, 60*time.Millisecond)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for k := range kills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		c.killAndReplace(rng.IntN(crashWorkers))
		t.Logf("kill %d done", k+1)
	}
	if err := <-fed; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			rdb := c.redis.Client(t)
			z, _ := rdb.ZRangeWithScores(context.Background(), "wp:{0}:delayed", 0, -1).Result()
			d, _ := rdb.HGetAll(context.Background(), "wp:{0}:delayed:data").Result()
			t.Logf("now %d delayed %v data %v", time.Now().UnixMilli(), z, d)
		}
	})
	c.requireOneRecordEach(ids, 2*time.Minute)
	dups, delivered := c.duplicates()
	t.Logf("%d jobs (half bulk), %d kills, %d duplicate sends", jobs, kills, dups)
	if bound := kills * inFlightPerProvider * 5; dups > bound {
		t.Fatalf("%d duplicate sends after %d kills; at most %d allowed", dups, kills, bound)
	}
	if len(delivered) != jobs {
		t.Fatalf("pushsim accepted %d distinct jobs, want %d", len(delivered), jobs)
	}
}
