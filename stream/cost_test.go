package stream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCommandsPerJob pins what the happy path costs Redis, commands run inside scripts
// included (INFO commandstats counts them): a later benchmark divides these by jobs. Per job:
// one upstream XADD, one EVALSHA to move it to its lane (which checks the jobs index and the
// sent mark), one EVALSHA to finish it; reads are batched. A first delivery needs no sent-mark
// check of its own: ToLane let in no copy of a job that is held or was sent.
func TestCommandsPerJob(t *testing.T) {
	env := newEnv(t)
	s := env.store(t, "w1", Options{}, "fcm")
	const n = 50
	var jobs [][]byte
	for i := range n {
		jobs = append(jobs, []byte(validJob(fmt.Sprintf("c%d", i))))
	}
	env.srv.ResetStats(t)
	if _, err := NewProducer(env.c, "", 1).Enqueue(env.ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	in := env.readIntake(t, s, n)
	for _, e := range in {
		mustOK(t)(s.moveToLane(env.ctx, e, "fcm", e.Fields["job"], ms(t0)))
	}
	for _, e := range env.readLane(t, s, "fcm", n) {
		mustOK(t)(s.Finish(env.ctx, e, Result{ID: jobID(e.Fields["job"]), Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}))
	}
	got := env.srv.CommandStats(t)
	// Not per job: the stats calls themselves and connection set-up (HELLO, CLIENT SETINFO)
	// as the pool grows.
	for k := range got {
		if k == "config|resetstat" || k == "info" || k == "hello" || strings.HasPrefix(k, "client|") {
			delete(got, k)
		}
	}
	want := map[string]int64{
		"xreadgroup": 2,       // one batch from the intake (inside read_intake), one from the lane
		"evalsha":    2*n + 1, // to_lane, finish; read_intake once
		"exists":     2 * n,   // to_lane's sent-mark check, finish's check that no other attempt was recorded
		"hexists":    n,       // to_lane's jobs-index check
		"hset":       n,       // the job enters the index
		"hdel":       n,       // and leaves it when finished
		"xadd":       3 * n,   // upstream, lane, ledger
		"xpending":   2 * n,   // the owner check of each script
		"xack":       2 * n,   // intake, lane
		"xdel":       2 * n,   // intake, lane
		"set":        n + 1,   // the sent mark; the producer's one-time shard check (SET NX)
		"get":        1,       // and its read of the recorded count
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("commands for %d jobs (-want +got):\n%s", n, d)
	}
}
