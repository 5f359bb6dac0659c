package inspect

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// ledgerOf is the ledger records of job id on shard 0, oldest first.
func (e *env) ledgerOf(t *testing.T, s *stream.Store, id string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, m := range e.entries(t, s.Keys(0).Results) {
		if f := fieldsOf(m); f["id"] == id {
			out = append(out, f)
		}
	}
	return out
}

// TestCancelWaitingJobs: a job in the intake (with a second copy), in the transactional lane,
// in the bulk lane and in the delayed set, none read by a worker, is removed from every place
// and gets exactly one CANCELED record; a second cancel finds nothing and writes nothing; the
// audit finds one terminal record each; nothing is left for a worker to read.
func TestCancelWaitingJobs(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	ins := inspectorOf(s)

	// A retry waiting in the delayed set, counted for its provider and its recipient.
	e := env.laneEntry(t, s, "fcm", "in-delayed")
	if v, err := s.ToDelayed(env.ctx, e, stream.RetryRecord{ID: "in-delayed", Provider: "fcm", Recipient: "r1", Due: t0.Add(time.Hour),
		Attempt: 2, Job: e.Fields["job"], EnqueuedAtMs: ms(t0), Code: "PROVIDER_DOWN", At: t0}); err != nil || v != stream.Queued {
		t.Fatalf("ToDelayed = %v, %v", v, err)
	}

	// A lane entry no worker has read: to_lane's move, read no further.
	env.enqueue(t, s, validJob("in-lane"))
	in := env.readIntake(t, s, 1)[0]
	if ok, err := moveToLane(env.ctx, s, in, "fcm", in.Fields["job"], ms(t0)); err != nil || !ok {
		t.Fatalf("ToLane = %v, %v", ok, err)
	}

	// A bulk lane entry, as the router writes one.
	if err := env.c.XAdd(env.ctx, &redis.XAddArgs{Stream: k.BulkLane("fcm"),
		Values: []any{"job", validJob("in-bulk"), "provider", "fcm", "attempt", "0", "enqueued_at", ms(t0)}}).Err(); err != nil {
		t.Fatal(err)
	}
	env.c.HSet(env.ctx, k.Jobs, "in-bulk", "fcm")

	env.enqueue(t, s, validJob("in-intake"), validJob("in-intake"))

	ids := []string{"in-intake", "in-lane", "in-bulk", "in-delayed"}
	got, err := ins.Cancel(env.ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	wantWhere := []string{"intake", "lane:fcm", "lane:fcm:bulk", "delayed"}
	for i, r := range got {
		if r.ID != ids[i] || r.State != Canceled || r.Where != wantWhere[i] {
			t.Errorf("Cancel %s = %+v; want cancelled in %s", ids[i], r, wantWhere[i])
		}
	}
	attempts := map[string]string{"in-intake": "0", "in-lane": "0", "in-bulk": "0", "in-delayed": "2"}
	for _, id := range ids {
		recs := env.ledgerOf(t, s, id)
		if len(recs) != 1 || recs[0]["code"] != CodeCanceled || recs[0]["provider"] != map[bool]string{true: "", false: "fcm"}[id == "in-intake"] ||
			recs[0]["attempt"] != attempts[id] || recs[0]["detail"] != CancelDetail {
			t.Errorf("ledger of %s = %v; want one CANCELED record", id, recs)
		}
	}
	for _, key := range []string{k.Intake, k.Lane("fcm"), k.BulkLane("fcm")} {
		if n := env.xlen(t, key); n != 0 {
			t.Errorf("%s holds %d entries after the cancel; want 0", key, n)
		}
	}
	for _, key := range []string{k.Jobs, k.Delayed, k.DelayedData, k.Rcpt, k.DelayedCount} {
		if n := env.c.Exists(env.ctx, key).Val(); n != 0 {
			t.Errorf("%s still exists after the cancel: %v", key, env.snapshot(t)[key])
		}
	}
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(48*time.Hour), 10); err != nil || n != 0 {
		t.Errorf("PromoteDue after the cancel = %d, %v; want nothing to promote", n, err)
	}

	// Twice: found nowhere, nothing written.
	again, err := ins.Cancel(env.ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.State != CancelUnknown {
			t.Errorf("second Cancel %s = %+v; want unknown", r.ID, r)
		}
	}
	rep, _, err := ins.Audit(env.ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExactlyOne != len(ids) {
		t.Errorf("audit %+v; want every id with exactly one record", rep)
	}
}

// TestCancelLeavesWorkersJobs: a job a worker has read (a pending intake entry, a pending lane
// entry) is reported in flight and left untouched, so the worker's own record is its one
// record; a job already accepted is reported sent; an id found nowhere is unknown.
func TestCancelLeavesWorkersJobs(t *testing.T) {
	env, s := newStore(t, "fcm")
	ins := inspectorOf(s)

	lane := env.laneEntry(t, s, "fcm", "flying")
	env.enqueue(t, s, validJob("routing"))
	routing := env.readIntake(t, s, 1)[0]
	done := env.laneEntry(t, s, "fcm", "done")
	if ok, err := s.Finish(env.ctx, done, stream.Result{ID: "done", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
		t.Fatalf("Finish = %v, %v", ok, err)
	}

	got, err := ins.Cancel(env.ctx, "flying", "routing", "done", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	want := []CancelResult{{"flying", CancelInFlight, "lane:fcm"}, {"routing", CancelInFlight, "intake"},
		{"done", CancelSent, ""}, {"nobody", CancelUnknown, ""}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Cancel %s = %+v; want %+v", want[i].ID, got[i], want[i])
		}
	}
	// The workers carry on: the read jobs end with their own records.
	if ok, err := s.Finish(env.ctx, lane, stream.Result{ID: "flying", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
		t.Fatalf("Finish of the job in flight = %v, %v", ok, err)
	}
	if v, err := s.ToLane(env.ctx, routing, "fcm", job.ClassTransactional, "routing", routing.Fields["job"], ms(t0)); err != nil || v != stream.Moved {
		t.Fatalf("ToLane of the routed job = %v, %v", v, err)
	}
	for _, id := range []string{"flying", "done"} {
		if recs := env.ledgerOf(t, s, id); len(recs) != 1 || recs[0]["code"] != "ACCEPTED" {
			t.Errorf("ledger of %s = %v; want its one ACCEPTED record", id, recs)
		}
	}
	if recs := env.ledgerOf(t, s, "routing"); len(recs) != 0 {
		t.Errorf("ledger of the routed job = %v; want none yet (it is in its lane)", recs)
	}
}

// TestCancelRacesTheWorker: cancels of jobs waiting in a lane and in the delayed set (due now)
// race a worker that promotes, reads and finishes them, and a second cancel of each: every job
// ends with exactly one record, CANCELED exactly when a cancel said it cancelled the job, the
// worker's own when the worker finished it.
func TestCancelRacesTheWorker(t *testing.T) {
	env, s := newStore(t, "fcm")
	ins := inspectorOf(s)
	const n = 40
	var ids []string
	// Half wait in the delayed set, due now; made first, so that each lane read below finds
	// the entry just moved.
	for i := 1; i < n; i += 2 {
		id := "race-" + itoa(int64(i))
		e := env.laneEntry(t, s, "fcm", id)
		if v, err := s.ToDelayed(env.ctx, e, stream.RetryRecord{ID: id, Provider: "fcm", Due: t0, Attempt: 1, Job: e.Fields["job"],
			EnqueuedAtMs: ms(t0), Code: "PROVIDER_DOWN", At: t0}); err != nil || v != stream.Queued {
			t.Fatalf("ToDelayed = %v, %v", v, err)
		}
	}
	// The other half in the lane, unread.
	for i := 0; i < n; i += 2 {
		id := "race-" + itoa(int64(i))
		env.enqueue(t, s, validJob(id))
		in := env.readIntake(t, s, 1)[0]
		if ok, err := moveToLane(env.ctx, s, in, "fcm", in.Fields["job"], ms(t0)); err != nil || !ok {
			t.Fatalf("ToLane = %v, %v", ok, err)
		}
	}
	for i := range n {
		ids = append(ids, "race-"+itoa(int64(i)))
	}
	finished := map[string]bool{}
	worker := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Hour), 3); err != nil {
				worker <- err
				return
			}
			es, _, err := s.ReadLanes(env.ctx, 0, "fcm", stream.LaneRead{Total: 2})
			if err != nil {
				worker <- err
				return
			}
			for _, e := range es {
				id := jobID(e.Fields["job"])
				ok, err := s.Finish(env.ctx, e, stream.Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0})
				if err != nil {
					worker <- err
					return
				}
				finished[id] = ok
			}
			if env.xlen(t, s.Keys(0).Lane("fcm")) == 0 && env.c.ZCard(env.ctx, s.Keys(0).Delayed).Val() == 0 {
				break
			}
		}
		worker <- nil
	}()
	cancelled := map[string]int{}
	for range 2 {
		for i := len(ids) - 1; i >= 0; i-- {
			got, err := ins.Cancel(env.ctx, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if got[0].State == Canceled {
				cancelled[ids[i]]++
			}
		}
	}
	if err := <-worker; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d cancelled, the rest finished by the worker", len(cancelled), n)
	for _, id := range ids {
		recs := env.ledgerOf(t, s, id)
		want := "ACCEPTED"
		if cancelled[id] > 0 {
			want = CodeCanceled
		}
		if len(recs) != 1 || recs[0]["code"] != want || cancelled[id] > 1 || (want == "ACCEPTED") != finished[id] {
			t.Errorf("%s: records %v, cancelled %d times, finished by the worker %v; want one %s record", id, recs, cancelled[id], finished[id], want)
		}
	}
}
