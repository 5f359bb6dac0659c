package stream

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCommandsPerJob pins what the happy path costs Redis, commands run inside scripts
// included (INFO commandstats counts them): a later benchmark divides these by jobs. Per job:
// one upstream XADD, one EVALSHA to move it to its lane (which checks the jobs index, the
// duplicate-suppression window), one EVALSHA to finish it (which puts the job in the window);
// reads are batched. A first delivery needs no check of its own that it was sent: ToLane let in no copy of a job that is held or was sent. This is the cost
// of jobs that each come alone; TestCommandsPerJobTogether is that of jobs that come together.
func TestCommandsPerJob(t *testing.T) {
	env, s := newStore(t, "fcm")
	warmWindow(t, env)
	const n = 50
	enqueueCounted(t, env, n)
	in := env.readIntake(t, s, n)
	for _, e := range in {
		mustOK(t)(s.moveToLane(env.ctx, e, "fcm", e.Fields["job"], ms(t0)))
	}
	for _, e := range env.readLane(t, s, "fcm", n) {
		mustOK(t)(s.Finish(env.ctx, e, Result{ID: jobID(e.Fields["job"]), Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}))
	}
	got := jobCommands(t, env)
	// The window's upkeep comes with some of the jobs: a sweep of one bucket for every 8 jobs
	// (HGETALL, PEXPIREAT, and HDEL when it drops stale fields), a split as the table grows
	// (HGETALL, DEL, HSET and PEXPIREAT of the two buckets), and the expiry of a bucket that is
	// new. A job's own write renews no bucket: the sweep's last round vouches for them all.
	// Counted apart, and bounded.
	upkeep := got["del"] + got["hgetall"] + got["pexpireat"] + got["hset"] - 3*n
	for _, c := range []string{"del", "hgetall", "pexpireat"} {
		delete(got, c)
	}
	// What is over each job's own count is upkeep; what is under it shows in the diff.
	got["hset"] = min(got["hset"], 3*n)
	want := map[string]int64{
		"xreadgroup": 2,       // one batch from the intake (inside read_intake), one from the lane
		"evalsha":    2*n + 1, // to_lane, finish; read_intake once
		"hmget":      5 * n,   // the jobs index and the window's state, in to_lane and in finish; to_lane's look in the window
		"hset":       3 * n,   // the job enters the index; the window: the job, and its state
		"hdel":       n,       // the job leaves the index when finished
		"xadd":       3 * n,   // upstream, lane, ledger
		"xpending":   2 * n,   // the owner check of each script
		"xack":       2 * n,   // intake, lane
		"xdel":       2 * n,   // intake, lane
		"set":        1,       // the producer's one-time shard check (SET NX)
		"get":        1,       // and its read of the recorded count
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("commands for %d jobs (-want +got):\n%s", n, d)
	}
	if upkeep > n/2 {
		t.Errorf("%d commands of the window's upkeep for %d jobs, want at most %d", upkeep, n, n/2)
	}
}

// TestCommandsPerJobTogether: the moves and records that a worker's goroutines issue at the
// same moment share one script call per pipeline (the group commit merges them), so what each
// job costs besides its own writes (the lane entry, the ledger record, the sent mark) is paid
// once for all of them: the script call, the owner check, the index and sent-mark lookups, the
// XACK and XDEL.
func TestCommandsPerJobTogether(t *testing.T) {
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
	for name, want := range map[string]int64{"xadd": 3 * n, "set": 1, "hdel": 1} {
		if got[name] != want {
			t.Errorf("%s: %d calls for %d jobs, want %d", name, got[name], n, want)
		}
	}
	// The moves: one call per pipeline, at most one a job; the records: one call.
	if got["evalsha"] > n/2+2 {
		t.Errorf("evalsha: %d calls for %d jobs, want at most %d", got["evalsha"], n, n/2+2)
	}
	var total int64
	for _, c := range got {
		total += c
	}
	// Each job's own writes (its upstream XADD, lane entry, ledger record, and its field in the
	// window), and for all of them a few dozen more: the scripts' shared lookups (the window's
	// among them, one a bucket), acks and deletes, and the window's upkeep.
	if limit := int64(4*n + 40); total > limit {
		t.Errorf("%d commands for %d jobs, want at most %d: %v", total, n, limit, got)
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
// warmWindow writes jobs to the window of the shard's default keys at Redis's clock, enough for
// two rounds of its sweep, as a window that has seen traffic has: the jobs counted after it
// meet the window as it runs, not as it starts (when every write renews its bucket).
func warmWindow(t *testing.T, env *env) {
	t.Helper()
	now, err := env.c.Time(env.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for b := range 8 {
		windowAdd(t, env, KeysFor("", 0).Window, now.Unix(), int64(DefaultSentTTL/time.Second), windowIDs("warm", b, 8)...)
	}
}

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
