package stream

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestScriptCallsAreSharedByJobsTogether: the moves and records that a worker's goroutines
// issue at the same moment share one script call per pipeline (the group commit merges them),
// so a job's round trip and script call are paid once for all of them. What the calls cost
// Redis is BenchmarkRedisCPUPerJob's figure.
func TestScriptCallsAreSharedByJobsTogether(t *testing.T) {
	// The records wait for each other; the moves go at once, and those that arrive while one
	// pipeline is out go in the next.
	env := newEnv(t)
	s := env.store(t, "w1", Options{CommitLinger: time.Minute}, "fcm")
	const n = 50
	enqueueCounted(t, env, n)
	together(t, env.readIntake(t, s, n), func(e Entry) (bool, error) {
		return s.moveToLane(env.ctx, e, "fcm", e.Fields["job"], ms(t0))
	})
	// Fewer than lingerEnough records: they go together once the last one has joined, which
	// the test cannot tell the group commit; the linger of a minute ends with a move (which may
	// not wait) in the same shard's pipeline.
	lane := env.readLane(t, s, "fcm", n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		together(t, lane, func(e Entry) (bool, error) {
			return s.Finish(env.ctx, e, Result{ID: jobID(e.Fields["job"]), Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, Linger: true, At: t0})
		})
	}()
	waitQueued(t, s.groups[0], n)
	if _, err := s.WasSent(env.ctx, 0, "c0"); err != nil {
		t.Fatal(err)
	}
	<-done
	got := jobCommands(t, env)
	// The moves: one call per pipeline, at most one a job; the records: one call.
	if got["evalsha"] > n/2+2 {
		t.Errorf("evalsha: %d calls for %d jobs, want at most %d", got["evalsha"], n, n/2+2)
	}
	if got["xadd"] != 3*n {
		t.Errorf("xadd: %d for %d jobs, want %d (the upstream's, the lane entry, the ledger record)", got["xadd"], n, 3*n)
	}
}

// jobCommands is INFO commandstats less what is not the jobs' (the stats calls themselves and
// connection set-up as the pool grows).
func jobCommands(t *testing.T, env *env) map[string]int64 {
	got := env.srv.CommandStats(t)
	for k := range got {
		if k == "config|resetstat" || k == "info" || k == "hello" || strings.HasPrefix(k, "client|") {
			delete(got, k)
		}
	}
	return got
}

// together runs op for every entry at once, as a worker does, and fails unless each returns
// true.
func together(t *testing.T, es []Entry, op func(Entry) (bool, error)) {
	t.Helper()
	all(t, es, func(e Entry) error {
		if ok, err := op(e); err != nil || !ok {
			return fmt.Errorf("entry %s: %v, %v", e.ID, ok, err)
		}
		return nil
	})
}

// waitQueued polls until g holds n queued calls.
func waitQueued(t *testing.T, g *groupCommit, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		queued := len(g.queue)
		g.mu.Unlock()
		if queued >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued after 10 s, want %d", queued, n)
		}
		runtime.Gosched()
	}
}

// enqueueCounted resets Redis's command statistics and enqueues n valid jobs (c0, c1, ...) as
// an upstream does, so that what the test counts starts with their XADDs.
func enqueueCounted(t *testing.T, env *env, n int) {
	t.Helper()
	var jobs [][]byte
	for i := range n {
		jobs = append(jobs, []byte(validJob(fmt.Sprintf("c%d", i))))
	}
	env.srv.ResetStats(t)
	if _, err := NewProducer(env.c, "", 1).Enqueue(env.ctx, jobs...); err != nil {
		t.Fatal(err)
	}
}
