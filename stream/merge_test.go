package stream

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// execMerged sends items as the group commit sends the calls that share a pipeline, and
// returns each item's result.
func execMerged(t *testing.T, s *Store, items ...*batchItem) []int64 {
	t.Helper()
	var calls []*groupCall
	for _, it := range items {
		calls = append(calls, &groupCall{item: it, done: make(chan struct{})})
	}
	s.groups[0].exec(calls)
	var out []int64
	for _, it := range items {
		if it.err != nil {
			t.Fatalf("merged call: %v", it.err)
		}
		out = append(out, it.result)
	}
	return out
}

// TestMergedToLaneKeepsEachVerdict: moves merged into one to_lane call each get the verdict
// they would get alone, in order: an entry not pending for the caller changes nothing, a job
// already held is a copy, and of two entries of one job in the same call the second is a copy.
func TestMergedToLaneKeepsEachVerdict(t *testing.T) {
	env, w1 := newStore(t, "fcm", "apple")
	w2 := env.store(t, "w2", Options{}, "fcm")
	env.enqueue(t, w1, validJob("held"))
	held := env.readIntake(t, w1, 1)[0]
	mustOK(t)(w1.moveToLane(env.ctx, held, "fcm", held.Fields["job"], ms(t0)))
	env.enqueue(t, w1, validJob("a"), validJob("held"), validJob("b"), validJob("b"), validJob("other"))
	in := env.readIntake(t, w1, 4)
	other := env.readIntake(t, w2, 1)[0] // pending for w2, not w1
	lane := func(p string) string { return w1.Keys(0).Lane(p) }
	got := execMerged(t, w1,
		w1.toLaneItem(in[0], lane("apple"), "apple", "a", in[0].Fields["job"], 1),
		w1.toLaneItem(in[1], lane("fcm"), "fcm", "held", in[1].Fields["job"], 1),
		w1.toLaneItem(in[2], lane("fcm"), "fcm", "b", in[2].Fields["job"], 1),
		w1.toLaneItem(in[3], lane("fcm"), "fcm", "b", in[3].Fields["job"], 1),
		w1.toLaneItem(other, lane("fcm"), "fcm", "other", other.Fields["job"], 1),
	)
	if d := cmp.Diff([]int64{int64(Moved), int64(Copy), int64(Moved), int64(Copy), int64(LaneNotOwner)}, got); d != "" {
		t.Errorf("verdicts (-want +got):\n%s", d)
	}
	if n := env.xlen(t, lane("apple")); n != 1 {
		t.Errorf("apple lane holds %d entries, want 1", n)
	}
	if n := env.xlen(t, lane("fcm")); n != 2 { // held, b
		t.Errorf("fcm lane holds %d entries, want 2", n)
	}
	// w2's entry is still in the intake, pending for w2; w1's four are gone.
	if n := env.xlen(t, w1.Keys(0).Intake); n != 1 {
		t.Errorf("intake holds %d entries, want 1 (w2's)", n)
	}
	idx, err := env.c.HGetAll(env.ctx, w1.Keys(0).Jobs).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"held": "fcm", "a": "apple", "b": "fcm"}, idx); d != "" {
		t.Errorf("jobs index (-want +got):\n%s", d)
	}
}

// TestMergedFinishKeepsEachOutcome: records merged into one finish call keep the rules of one
// terminal record per job: an owned entry is recorded and acknowledged; an entry another
// consumer took over (handed back and read again) is recorded only when its send was accepted,
// and the new owner's copy, whose own record then only acknowledges, stays pending for it.
func TestMergedFinishKeepsEachOutcome(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	a := env.laneEntry(t, w1, "fcm", "a")
	gone := env.laneEntry(t, w1, "fcm", "g")
	taken := env.laneEntry(t, w1, "fcm", "t")
	lost := env.laneEntry(t, w1, "fcm", "l")
	laneKey := w1.Keys(0).Lane("fcm")
	for _, e := range []Entry{taken, lost} {
		env.age(t, laneKey, "w1", e.ID, 10*time.Minute, 1)
	}
	claimed := env.takeOver(t, w2, laneKey, time.Minute, 5, "w2")
	if len(claimed) != 2 {
		t.Fatalf("w2 took over %d entries, want 2", len(claimed))
	}
	accepted := func(id string) Result {
		return Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}
	}
	got := execMerged(t, w1,
		w1.finishItem(a, accepted("a")),
		w1.finishItem(gone, Result{ID: "g", Provider: "fcm", Code: "GONE", Status: 410, Gone: true, MarkGone: true, Endpoint: testEndpoint, At: t0}),
		w1.finishItem(taken, accepted("t")),                                                  // reclaimed, but the push is out
		w1.finishItem(lost, Result{ID: "l", Provider: "fcm", Code: "PROVIDER_DOWN", At: t0}), // reclaimed: nothing
	)
	if d := cmp.Diff([]int64{1, 1, 1, 0}, got); d != "" {
		t.Errorf("w1's results (-want +got):\n%s", d)
	}
	// w2 owns t and l now: t only acks (its job was recorded), l is recorded.
	byID := map[string]Entry{}
	for _, e := range claimed {
		byID[jobID(e.Fields["job"])] = e
	}
	got = execMerged(t, w2,
		w2.finishItem(byID["t"], Result{ID: "t", Provider: "fcm", Code: "GONE", Status: 410, At: t0}),
		w2.finishItem(byID["l"], accepted("l")),
	)
	if d := cmp.Diff([]int64{1, 1}, got); d != "" {
		t.Errorf("w2's results (-want +got):\n%s", d)
	}
	var codes []string
	for _, m := range env.entries(t, w1.Keys(0).Results) {
		codes = append(codes, fieldsOf(m)["id"]+" "+fieldsOf(m)["code"])
	}
	if d := cmp.Diff([]string{"a ACCEPTED", "g GONE", "t ACCEPTED", "l ACCEPTED"}, codes); d != "" {
		t.Errorf("ledger (-want +got):\n%s", d)
	}
	if n := env.xlen(t, w1.Keys(0).Gone); n != 1 {
		t.Errorf("gone stream holds %d records, want 1", n)
	}
	if marked, _ := w1.IsGone(env.ctx, 0, testEndpoint); !marked {
		t.Error("the GONE endpoint has no gone mark")
	}
	for _, id := range []string{"a", "t", "l"} {
		if sent, _ := w1.WasSent(env.ctx, 0, id); !sent {
			t.Errorf("%s has no sent mark", id)
		}
	}
	if n, p := env.xlen(t, laneKey), env.pending(t, laneKey); n != 0 || p != 0 {
		t.Errorf("lane: %d entries, %d pending; want none", n, p)
	}
	if n := env.c.HLen(env.ctx, w1.Keys(0).Jobs).Val(); n != 0 {
		t.Errorf("jobs index holds %d jobs, want 0", n)
	}
}

// TestLateAcceptedSendOfAnEndedJob: a send accepted after another replica took its entry over
// and ended the job (with a GONE record, or dead-lettered it for too many deliveries) writes
// nothing: no second terminal record, no "accepted" mark in the jobs index (which would outlive
// the job and swallow every later copy of its id), and no window entry (which would swallow the
// replay of the dead-lettered job); the replay is delivered and recorded.
func TestLateAcceptedSendOfAnEndedJob(t *testing.T) {
	for _, ending := range []string{"gone", "too many deliveries"} {
		t.Run(ending, func(t *testing.T) {
			env, w1 := newStore(t, "fcm")
			w2 := env.store(t, "w2", Options{}, "fcm")
			e := env.laneEntry(t, w1, "fcm", "j")
			laneKey := w1.Keys(0).Lane("fcm")
			if ending == "gone" {
				env.age(t, laneKey, "w1", e.ID, 10*time.Minute, 1)
				claimed := env.takeOver(t, w2, laneKey, time.Minute, 5, "w2")
				if len(claimed) != 1 {
					t.Fatalf("w2 took over %d entries, want 1", len(claimed))
				}
				if ok, err := w2.Finish(env.ctx, claimed[0], Result{ID: "j", Provider: "fcm", Code: "GONE", Status: 410, At: t0}); !ok || err != nil {
					t.Fatalf("w2 Finish: %v, %v", ok, err)
				}
			} else {
				env.age(t, laneKey, "w1", e.ID, 10*time.Minute, 5)
				if got, err := w2.Requeue(env.ctx, 0, laneKey, Requeue{MinIdle: time.Minute, Count: 10, MaxDeliveries: 5, Alive: []string{"w2"}}); err != nil || got.TooManyDeliveries != 1 {
					t.Fatalf("Requeue: %v, %+v; want the entry dead-lettered", err, got)
				}
			}
			if ok, err := w1.Finish(env.ctx, e, Result{ID: "j", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); ok || err != nil {
				t.Fatalf("w1's late Finish: %v, %v; want false: the job has its record", ok, err)
			}
			if n := env.xlen(t, w1.Keys(0).Results) + env.xlen(t, w1.Keys(0).Dead); n != 1 {
				t.Errorf("ledger and dead stream hold %d records for the job, want its one", n)
			}
			if idx := env.c.HGetAll(env.ctx, w1.Keys(0).Jobs).Val(); len(idx) != 0 {
				t.Errorf("jobs index %v after the job ended; want it empty", idx)
			}
			if sent, err := w1.WasSent(env.ctx, 0, "j"); err != nil || sent {
				t.Errorf("WasSent(j) = %v, %v; want false: a replay of the job is a new delivery", sent, err)
			}
		})
	}
}

// TestRequeueDoesNotDeadLetterAnAcceptedJob: an entry delivered too often whose job another
// attempt's accepted send already recorded (the jobs index says "accepted") is removed without
// a dead record, so the job keeps its one terminal record.
func TestRequeueDoesNotDeadLetterAnAcceptedJob(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	w3 := env.store(t, "w3", Options{}, "fcm")
	e := env.laneEntry(t, w1, "fcm", "j")
	laneKey := w1.Keys(0).Lane("fcm")
	env.age(t, laneKey, "w1", e.ID, 10*time.Minute, 1)
	claimed := env.takeOver(t, w2, laneKey, time.Minute, 5, "w2")
	if len(claimed) != 1 {
		t.Fatalf("w2 took over %d entries, want 1", len(claimed))
	}
	// w1's send, accepted while w2 holds the entry: recorded, and the job marked accepted.
	if ok, err := w1.Finish(env.ctx, e, Result{ID: "j", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); !ok || err != nil {
		t.Fatalf("w1's late Finish: %v, %v", ok, err)
	}
	env.age(t, laneKey, "w2", claimed[0].ID, 10*time.Minute, 5)
	if got, err := w3.Requeue(env.ctx, 0, laneKey, Requeue{MinIdle: time.Minute, Count: 10, MaxDeliveries: 5, Alive: []string{"w3"}}); err != nil || got != (Requeued{}) {
		t.Fatalf("Requeue by w3: %v, %+v; want the entry removed with no dead record", err, got)
	}
	if n, d := env.xlen(t, w1.Keys(0).Results), env.xlen(t, w1.Keys(0).Dead); n != 1 || d != 0 {
		t.Errorf("%d ledger and %d dead records; want the one ACCEPTED record", n, d)
	}
	if n := env.xlen(t, laneKey); n != 0 {
		t.Errorf("lane holds %d entries, want none", n)
	}
	if idx := env.c.HGetAll(env.ctx, w1.Keys(0).Jobs).Val(); len(idx) != 0 {
		t.Errorf("jobs index %v; want it empty", idx)
	}
}

// TestMergedCallAfterScriptFlush: a merged call whose script Redis forgot (a restart) is sent
// again with EVAL and gives every item its result.
func TestMergedCallAfterScriptFlush(t *testing.T) {
	env, s := newStore(t, "fcm")
	a, b := env.laneEntry(t, s, "fcm", "a"), env.laneEntry(t, s, "fcm", "b")
	if err := env.c.ScriptFlush(env.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	got := execMerged(t, s,
		s.finishItem(a, Result{ID: "a", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}),
		s.finishItem(b, Result{ID: "b", Provider: "fcm", Code: "INVALID_REQUEST", Status: 400, At: t0}),
	)
	if d := cmp.Diff([]int64{1, 1}, got); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
	if n := env.xlen(t, s.Keys(0).Results); n != 2 {
		t.Errorf("ledger holds %d records, want 2", n)
	}
}

// TestFinishRetriedAfterItWentThrough: a record whose reply was lost (Redis restarted after
// running it) is written again by the worker's retry; the entry is gone by then, and the
// window knows the job was accepted, so the retry writes no second record.
func TestFinishRetriedAfterItWentThrough(t *testing.T) {
	env, s := newStore(t, "fcm")
	e := env.laneEntry(t, s, "fcm", "j1")
	r := Result{ID: "j1", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}
	mustOK(t)(s.Finish(env.ctx, e, r))
	if ok, err := s.Finish(env.ctx, e, r); ok || err != nil {
		t.Errorf("the retried Finish = %v, %v; want false (nothing changed)", ok, err)
	}
	if n := env.xlen(t, s.Keys(0).Results); n != 1 {
		t.Errorf("ledger holds %d records for j1, want 1", n)
	}
}

// TestOnlyRecordsAskedToLingerWait: with a commit linger set, a record whose Result asks for
// it waits at least the linger for others to share its pipeline, and a record that does not
// ask goes at once: with a linger of an hour it is done within the context's minute.
func TestOnlyRecordsAskedToLingerWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		linger time.Duration
		asks   bool
	}{{"asks", 300 * time.Millisecond, true}, {"does not ask", time.Hour, false}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			s := env.store(t, "w1", Options{CommitLinger: tc.linger}, "fcm")
			env.enqueue(t, s, validJob("j"))
			in := env.readIntake(t, s, 1)[0]
			mustOK(t)(s.moveToLane(env.ctx, in, "fcm", in.Fields["job"], ms(t0)))
			e := env.readLane(t, s, "fcm", 1)[0]
			ctx, cancel := context.WithTimeout(env.ctx, time.Minute)
			defer cancel()
			began := time.Now()
			mustOK(t)(s.Finish(ctx, e, Result{ID: "j", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, Linger: tc.asks, At: t0}))
			if took := time.Since(began); tc.asks && took < tc.linger {
				t.Errorf("a record that asks to linger went after %s, before the linger of %s", took, tc.linger)
			}
			if n := env.xlen(t, s.Keys(0).Results); n != 1 {
				t.Errorf("%d ledger records, want 1", n)
			}
		})
	}
}
