package stream

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAuditWhere places one job in every place and checks each is reported there.
func TestAuditWhere(t *testing.T) {
	env, s := newStore(t, "fcm", "apple")
	// Terminal records.
	for _, id := range []string{"done", "twice"} {
		e := env.laneEntry(t, s, "fcm", id)
		mustOK(t)(s.Finish(env.ctx, e, Result{ID: id, Provider: "fcm", Code: "ACCEPTED", At: t0}))
	}
	env.enqueue(t, s, validJob("invalid"))
	in := env.readIntake(t, s, 1)[0]
	mustOK(t)(s.ToDead(env.ctx, in, DeadRecord{ID: "invalid", Code: "INVALID_JOB", Reason: "x", Job: in.Fields["job"], At: t0}))
	e := env.laneEntry(t, s, "apple", "twice")
	mustOK(t)(s.ToDead(env.ctx, e, DeadRecord{ID: "twice", Code: "PROVIDER_DOWN", Reason: "x", Job: e.Fields["job"], At: t0}))

	// On their way: read from intake (pending), in a lane unread, in a lane pending, delayed,
	// unread in intake.
	env.enqueue(t, s, validJob("intake-pending"))
	env.readIntake(t, s, 1)
	env.enqueue(t, s, validJob("lane-unread"))
	in = env.readIntake(t, s, 1)[0]
	mustOK(t)(s.moveToLane(env.ctx, in, "apple", in.Fields["job"], ms(t0)))
	env.laneEntry(t, s, "fcm", "lane-pending")
	e = env.laneEntry(t, s, "fcm", "delayed")
	if v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: "delayed", Provider: "fcm", Due: t0.Add(time.Hour), Attempt: 1, Job: e.Fields["job"]}); v != Queued || err != nil {
		t.Fatal(v, err)
	}
	env.enqueue(t, s, validJob("intake-unread"))

	ids := []string{"done", "twice", "invalid", "intake-pending", "lane-unread", "lane-pending", "delayed", "intake-unread", "lost"}
	got, _, err := inspectorOf(s).Audit(env.ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	want := AuditReport{
		Total: 9, ExactlyOne: 2, None: 6, MoreThanOne: 1,
		NoneWhere:  map[string]int{"pending": 2, "lane:apple": 1, "delayed": 1, "intake": 1, "nowhere": 1},
		Missing:    []string{"intake-pending", "lane-unread", "lane-pending", "delayed", "intake-unread", "lost"},
		Duplicated: []string{"twice"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Audit (-want +got):\n%s", d)
	}

	// Everything accounted for: no scan of the waiting places is needed.
	got, _, err = inspectorOf(s).Audit(env.ctx, []string{"done", "invalid"})
	if err != nil {
		t.Fatal(err)
	}
	want = AuditReport{Total: 2, ExactlyOne: 2, NoneWhere: map[string]int{}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Audit all done (-want +got):\n%s", d)
	}

	counts, err := inspectorOf(s).Counts(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := map[string]int64{"intake": 2, "lane:fcm": 1, "lane:fcm:bulk": 0, "lane:apple": 1, "lane:apple:bulk": 0, "pending": 2, "delayed": 1, "results": 2, "gone": 0, "dead": 2}
	if d := cmp.Diff(wantCounts, counts); d != "" {
		t.Errorf("Counts (-want +got):\n%s", d)
	}
}

// TestAuditFindsLanesBySCAN: a store that never ran Setup for a provider still finds its lane.
func TestAuditFindsLanesBySCAN(t *testing.T) {
	env, w := newStore(t, "fcm", "wns")
	env.enqueue(t, w, validJob("x"))
	in := env.readIntake(t, w, 1)[0]
	mustOK(t)(w.moveToLane(env.ctx, in, "wns", in.Fields["job"], 1))
	auditor := New(env.c, env.c, Options{Consumer: "audit"})
	got, _, err := inspectorOf(auditor).Audit(env.ctx, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if got.NoneWhere["lane:wns"] != 1 {
		t.Errorf("Audit = %+v, want x in lane:wns", got)
	}
}
