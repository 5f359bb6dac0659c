package inspect

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestAuditWhere places one job in every place and checks each is reported there.
func TestAuditWhere(t *testing.T) {
	env, s := newStore(t, "fcm", "apple")
	// Terminal records.
	for _, id := range []string{"done", "twice"} {
		e := env.laneEntry(t, s, "fcm", id)
		mustOK(t)(s.Finish(env.ctx, e, stream.Result{ID: id, Provider: "fcm", Code: "ACCEPTED", At: t0}))
	}
	env.enqueue(t, s, validJob("invalid"))
	in := env.readIntake(t, s, 1)[0]
	mustOK(t)(s.ToDead(env.ctx, in, stream.DeadRecord{ID: "invalid", Code: "INVALID_JOB", Reason: "x", Job: in.Fields["job"], At: t0}))
	e := env.laneEntry(t, s, "apple", "twice")
	mustOK(t)(s.ToDead(env.ctx, e, stream.DeadRecord{ID: "twice", Code: "PROVIDER_DOWN", Reason: "x", Job: e.Fields["job"], At: t0}))

	// On their way: read from intake (pending), in a lane unread, in a lane pending, delayed,
	// unread in intake.
	env.enqueue(t, s, validJob("intake-pending"))
	env.readIntake(t, s, 1)
	env.enqueue(t, s, validJob("lane-unread"))
	in = env.readIntake(t, s, 1)[0]
	mustOK(t)(moveToLane(env.ctx, s, in, "apple", in.Fields["job"], ms(t0)))
	env.laneEntry(t, s, "fcm", "lane-pending")
	e = env.laneEntry(t, s, "fcm", "delayed")
	if v, err := s.ToDelayed(env.ctx, e, stream.RetryRecord{ID: "delayed", Provider: "fcm", Due: t0.Add(time.Hour), Attempt: 1, Job: e.Fields["job"]}); v != stream.Queued || err != nil {
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
	wantCounts := map[string]int64{"intake": 2, "intake:bulk": 0, "lane:fcm": 1, "lane:fcm:bulk": 0, "lane:apple": 1, "lane:apple:bulk": 0, "pending": 2, "delayed": 1, "results": 2, "gone": 0, "dead": 2}
	if d := cmp.Diff(wantCounts, counts); d != "" {
		t.Errorf("Counts (-want +got):\n%s", d)
	}
}

// TestAuditFindsLanesBySCAN: a store that never ran Setup for a provider still finds its lane.
func TestAuditFindsLanesBySCAN(t *testing.T) {
	env, w := newStore(t, "fcm", "wns")
	env.enqueue(t, w, validJob("x"))
	in := env.readIntake(t, w, 1)[0]
	mustOK(t)(moveToLane(env.ctx, w, in, "wns", in.Fields["job"], 1))
	auditor := stream.New(env.c, env.c, stream.Options{Consumer: "audit"})
	got, _, err := inspectorOf(auditor).Audit(env.ctx, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if got.NoneWhere["lane:wns"] != 1 {
		t.Errorf("Audit = %+v, want x in lane:wns", got)
	}
}

// TestAuditRefusesAnotherShardCount: an audit with another shard count than the one the
// prefix's first user recorded is refused with both counts named; an audit of another prefix
// is independent, and records nothing.
func TestAuditRefusesAnotherShardCount(t *testing.T) {
	env := newEnv(t)
	env.store(t, "w1", stream.Options{Shards: 4}, "fcm")
	want := `stream: shard count mismatch: prefix "wp" is used with 4 shards (recorded in wp:shards) but this process was given 1; use --shards 4`
	if _, _, err := New(env.c, stream.Options{Shards: 1}).Audit(env.ctx, []string{"x"}); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Audit with 1 shard = %v; want %q...", err, want)
	}
	if _, _, err := New(env.c, stream.Options{Prefix: "other", Shards: 2}).Audit(env.ctx, nil); err != nil {
		t.Errorf("Audit of an unused prefix: %v (it must record nothing and refuse nothing)", err)
	}
	if env.c.Exists(env.ctx, stream.ShardsKey("other")).Val() != 0 {
		t.Error("Audit recorded a shard count")
	}
}

// TestAuditReadsLeftShards: the jobs a larger shard count left in shards beyond those the
// audit reads, and that a worker with ReshardFrom finished there, are found with their one
// record each.
func TestAuditReadsLeftShards(t *testing.T) {
	env := newEnv(t)
	old := env.store(t, "old", stream.Options{Shards: 2, ReshardFrom: 4}, "fcm") // reads 4, records 2
	for _, sh := range []int{2, 3} {
		id := fmt.Sprintf("left-%d", sh)
		if err := env.c.XAdd(env.ctx, redisXAdd(stream.KeysFor("", sh).Intake, validJob(id))).Err(); err != nil {
			t.Fatal(err)
		}
		es, _, err := old.ReadIntake(env.ctx, sh, job.ClassTransactional, 10, 0)
		if err != nil || len(es) != 1 {
			t.Fatalf("ReadIntake shard %d = %v, %v", sh, es, err)
		}
		if v, err := old.ToLane(env.ctx, es[0], "fcm", job.ClassTransactional, id, es[0].Fields["job"], 1); err != nil || v != stream.Moved {
			t.Fatalf("ToLane = %v, %v", v, err)
		}
		le, _, err := old.ReadLanes(env.ctx, sh, "fcm", stream.LaneRead{Total: 10})
		if err != nil || len(le) != 1 {
			t.Fatalf("ReadLane shard %d = %v, %v", sh, le, err)
		}
		if ok, err := old.Finish(env.ctx, le[0], stream.Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true}); err != nil || !ok {
			t.Fatalf("Finish = %v, %v", ok, err)
		}
	}
	rep, _, err := New(env.c, stream.Options{Shards: 2}).Audit(env.ctx, []string{"left-2", "left-3"})
	if err != nil || rep.ExactlyOne != 2 {
		t.Errorf("Audit of the jobs finished in shards 2 and 3 = %+v, %v; want both with one record", rep, err)
	}
}
