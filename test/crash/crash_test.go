// Package crash_test runs the real gateway-worker binary against a real Redis and pushsim, and
// kills things: workers with SIGKILL at random moments, and Redis itself. At quiescence every
// job must have exactly one terminal record, and duplicate sends must stay within what
// at-least-once delivery allows.
package crash_test

import (
	"math/rand/v2"
	"testing"
	"time"
)

const (
	crashJobs    = 2000
	crashWorkers = 3
	crashKills   = 12
)

func TestWorkersKilledLoseNoJob(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t)
	lines, ids := c.jobs(crashJobs)
	c.startWorkers(crashWorkers)
	fed := c.feed(lines, 60*time.Millisecond) // about 5 s of load, the span of the kills

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for k := range crashKills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond) // a random moment to kill at
		c.killAndReplace(rng.IntN(crashWorkers))
		t.Logf("kill %d done", k+1)
	}
	if err := <-fed; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	c.requireOneRecordEach(ids, 2*time.Minute)
	c.auditCLI(ids)
	dups, delivered := c.duplicates()
	bound := crashKills * inFlightPerProvider * 5 // the in-flight cap of one process, per kill
	t.Logf("%d jobs, %d kills, %d duplicate sends (bound %d)", crashJobs, crashKills, dups, bound)
	if dups > bound {
		t.Fatalf("%d duplicate sends after %d kills; at most %d allowed", dups, crashKills, bound)
	}
	if len(delivered) != crashJobs {
		t.Fatalf("pushsim accepted %d distinct jobs, want %d", len(delivered), crashJobs)
	}
}

func TestRedisKilledLosesNoJob(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t)
	const jobs = 1500
	lines, ids := c.jobs(jobs)
	c.startWorkers(crashWorkers)
	fed := c.feed(lines, 40*time.Millisecond) // about 2.4 s of load, the span of the restarts
	for k := range 3 {
		time.Sleep(300 * time.Millisecond) // let work flow between restarts
		c.redis.Kill()
		time.Sleep(200 * time.Millisecond) // Redis stays down for a moment, as in an outage
		c.redis.Restart()
		t.Logf("redis restart %d done", k+1)
	}
	if err := <-fed; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	c.requireOneRecordEach(ids, 2*time.Minute)
	dups, delivered := c.duplicates()
	t.Logf("%d jobs, 3 Redis kills, %d duplicate sends", jobs, dups)
	if len(delivered) != jobs {
		t.Fatalf("pushsim accepted %d distinct jobs, want %d", len(delivered), jobs)
	}
}
