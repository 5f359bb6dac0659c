package crash_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// TestWorkersKilledLoseNeitherClass: half the jobs bulk, half transactional, over the listed
// providers, and workers SIGKILLed while both classes flow. Every job of both classes ends with
// exactly one record: a bulk job's entries (in its lane, pending for a killed worker, waiting
// to retry) are reclaimed and recorded as a transactional job's are.
func TestWorkersKilledLoseNeitherClass(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t)
	const jobs, kills = 1200, 6
	all, allIDs := c.jobs(jobs + jobs/4)
	// The listed providers' jobs only: c.jobs gives every fifth block of twenty to the fallback
	// lane's self-hosted host, whose host breaker (three transport failures skip it for its
	// cooldown) turns a loaded machine's timeouts into CIRCUIT_OPEN retries that outlast the
	// deadline; the classes are the same code on every lane.
	var lines [][]byte
	var ids []string
	for i := range all {
		if i%100 < 80 && len(lines) < jobs {
			lines, ids = append(lines, all[i]), append(ids, allIDs[i])
		}
	}
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
