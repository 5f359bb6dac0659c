package inspect

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

// TestToDelayedKeepsTheLastOutcome: a retry's delayed data holds the code and detail of the
// attempt that sent it there (cut to MaxDetail), and when it was queued; a put-back holds no
// outcome; the promoter writes the lane entry's four fields only; a retry refused by a cap is
// dead-lettered as before.
func TestToDelayedKeepsTheLastOutcome(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	long := strings.Repeat("x", stream.MaxDetail+50)
	e := env.laneEntry(t, s, "fcm", "retry")
	at := t0.Add(time.Second)
	v, err := s.ToDelayed(env.ctx, e, stream.RetryRecord{ID: "retry", Provider: "fcm", Due: t0.Add(time.Minute), Attempt: 3,
		Job: e.Fields["job"], EnqueuedAtMs: ms(t0), Code: "PROVIDER_DOWN", Detail: long, At: at})
	if err != nil || v != stream.Queued {
		t.Fatalf("ToDelayed = %v, %v", v, err)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(env.c.HGet(env.ctx, k.DelayedData, "retry").Val()), &data); err != nil {
		t.Fatal(err)
	}
	if data["last_code"] != "PROVIDER_DOWN" || data["last_detail"] != long[:stream.MaxDetail]+"..." || data["queued_at"] != itoa(ms(at)) {
		t.Errorf("delayed data %v: want last_code PROVIDER_DOWN, last_detail cut to %d bytes, queued_at %d", data, stream.MaxDetail, ms(at))
	}
	rep, err := inspectorOf(s).Inspect(env.ctx, "retry", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := &DelayedJob{Due: t0.Add(time.Minute), Provider: "fcm", Attempt: 3, LastCode: "PROVIDER_DOWN",
		LastDetail: long[:stream.MaxDetail] + "...", QueuedAt: at, EnqueuedAt: t0}
	if d := cmp.Diff(want, rep.Delayed); d != "" {
		t.Errorf("Inspect's delayed job (-want +got):\n%s", d)
	}
	if rep.Held != "fcm" || rep.Lane != nil || !rep.Found() {
		t.Errorf("report %+v: want held by fcm, no lane entry", rep)
	}

	// A put-back: no attempt, so no outcome.
	e2 := env.laneEntry(t, s, "fcm", "putback")
	if v, err := s.ToDelayed(env.ctx, e2, stream.RetryRecord{ID: "putback", Provider: "fcm", Due: t0, Attempt: 0, Job: e2.Fields["job"], EnqueuedAtMs: ms(t0)}); err != nil || v != stream.Queued {
		t.Fatalf("put-back ToDelayed = %v, %v", v, err)
	}
	if raw := env.c.HGet(env.ctx, k.DelayedData, "putback").Val(); strings.Contains(raw, "last_") {
		t.Errorf("a put-back's delayed data %s holds an outcome", raw)
	}

	// A retry refused by a cap (the set holds two): dead, with the attempt that failed and the cap's reason.
	e3 := env.laneEntry(t, s, "fcm", "refused")
	v, err = s.ToDelayed(env.ctx, e3, stream.RetryRecord{ID: "refused", Provider: "fcm", Due: t0, Attempt: 2, Job: e3.Fields["job"],
		MaxDelayed: 1, Code: "RATE_LIMITED", Detail: "slow down", At: at})
	if err != nil {
		t.Fatal(err)
	}
	if v != stream.DeadGlobalCap {
		t.Fatalf("ToDelayed past the cap = %v; want %v", v, stream.DeadGlobalCap)
	}
	dead := env.entries(t, k.Dead)
	if len(dead) != 1 || fieldsOf(dead[0])["code"] != "RATE_LIMITED" || fieldsOf(dead[0])["attempt"] != "1" ||
		!strings.HasPrefix(fieldsOf(dead[0])["reason"], "delayed set is full") {
		t.Errorf("dead records %v: want one RATE_LIMITED record of attempt 1, the cap named", dead)
	}
	// The promoter writes the lane entry as it always did: the extra fields stay behind.
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("PromoteDue = %d, %v; want 2", n, err)
	}
	for _, m := range env.entries(t, k.Lane("fcm")) {
		f := fieldsOf(m)
		keys := make([]string, 0, len(f))
		for name := range f {
			keys = append(keys, name)
		}
		if d := cmp.Diff([]string{"attempt", "enqueued_at", "job", "provider"}, keys, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
			t.Errorf("promoted lane entry's fields (-want +got):\n%s", d)
		}
	}

}

// TestInspectFindsEveryPlace: a backlog with a job in every place a job can be, and Inspect
// finds each where it is.
func TestInspectFindsEveryPlace(t *testing.T) {
	env, s := newStore(t, "fcm", "apple", "wns")
	k := s.Keys(0)
	// Routed and read: in flight on w1.
	inFlight := env.laneEntry(t, s, "fcm", "in-flight")
	// Routed, not read (no other job goes to that lane).
	env.enqueue(t, s, validJob("in-lane"))
	in := env.readIntake(t, s, 1)[0]
	if ok, err := moveToLane(env.ctx, s, in, "wns", in.Fields["job"], ms(t0)); err != nil || !ok {
		t.Fatalf("ToLane = %v, %v", ok, err)
	}
	// Waiting to retry.
	waiting := env.laneEntry(t, s, "fcm", "waiting")
	if v, err := s.ToDelayed(env.ctx, waiting, stream.RetryRecord{ID: "waiting", Provider: "fcm", Due: t0.Add(time.Hour), Attempt: 1,
		Job: waiting.Fields["job"], EnqueuedAtMs: ms(t0), Code: "RATE_LIMITED", Detail: "429 slow down"}); err != nil || v != stream.Queued {
		t.Fatalf("ToDelayed = %v, %v", v, err)
	}
	// Accepted.
	done := env.laneEntry(t, s, "fcm", "done")
	if ok, err := s.Finish(env.ctx, done, stream.Result{ID: "done", Provider: "fcm", Code: "ACCEPTED", Status: 201, Attempt: 0, At: t0, Sent: true}); err != nil || !ok {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	// Dead-lettered from the lane.
	dead := env.laneEntry(t, s, "apple", "dead")
	if ok, err := s.ToDead(env.ctx, dead, stream.DeadRecord{ID: "dead", Code: "PROVIDER_DOWN", Reason: "gave up after 9 attempts", Attempt: 8,
		Provider: "apple", Job: dead.Fields["job"], At: t0}); err != nil || !ok {
		t.Fatalf("ToDead = %v, %v", ok, err)
	}
	// Read by the intake, not routed (its worker died); then one nobody read.
	env.enqueue(t, s, validJob("intake-read"))
	env.readIntake(t, s, 1)
	env.enqueue(t, s, validJob("intake-new"))

	type where struct {
		Held, Lane, Pending string
		Attempt             int
		Intake              []string // "new" or the consumer
		Delayed             string   // last code
		Results, Dead       []string // codes
		Sent                bool
	}
	look := func(id string) where {
		t.Helper()
		rep, err := inspectorOf(s).Inspect(env.ctx, id, 0)
		if err != nil {
			t.Fatalf("Inspect %s: %v", id, err)
		}
		if len(rep.Cut) > 0 {
			t.Errorf("Inspect %s with no limit cut %v", id, rep.Cut)
		}
		w := where{Held: rep.Held, Sent: rep.Sent}
		if rep.Lane != nil {
			w.Lane, w.Attempt = rep.Lane.Key, rep.Lane.Attempt
			if rep.Lane.Pending != nil {
				w.Pending = rep.Lane.Pending.Consumer
			}
		}
		for _, p := range rep.Intake {
			c := "new"
			if p.Pending != nil {
				c = p.Pending.Consumer
			}
			w.Intake = append(w.Intake, c)
		}
		if rep.Delayed != nil {
			w.Delayed = rep.Delayed.LastCode
		}
		for _, r := range rep.Results {
			w.Results = append(w.Results, r.Code)
		}
		for _, d := range rep.Dead {
			w.Dead = append(w.Dead, d.Code)
		}
		return w
	}
	cases := map[string]where{
		"in-flight":   {Held: "fcm", Lane: k.Lane("fcm"), Pending: "w1"},
		"in-lane":     {Held: "wns", Lane: k.Lane("wns")},
		"waiting":     {Held: "fcm", Delayed: "RATE_LIMITED"},
		"done":        {Results: []string{"ACCEPTED"}, Sent: true},
		"dead":        {Dead: []string{"PROVIDER_DOWN"}},
		"intake-read": {Intake: []string{"w1"}},
		"intake-new":  {Intake: []string{"new"}},
		"nowhere":     {},
	}
	for id, want := range cases {
		if d := cmp.Diff(want, look(id)); d != "" {
			t.Errorf("Inspect %s (-want +got):\n%s", id, d)
		}
	}
	rep, _ := inspectorOf(s).Inspect(env.ctx, "in-flight", 0)
	if p := rep.Lane.Pending; p.Deliveries != 1 || rep.Lane.EntryID != inFlight.ID {
		t.Errorf("in-flight lane entry %+v, pending %+v: want entry %s delivered once", rep.Lane, p, inFlight.ID)
	}
	if rep, _ := inspectorOf(s).Inspect(env.ctx, "nowhere", 0); rep.Found() {
		t.Errorf("a job never enqueued is found: %+v", rep)
	}
}

// TestInspectSaysWhenAScanWasCut: with more records than the limit, the newest are read and the
// report names the streams it did not finish.
func TestInspectSaysWhenAScanWasCut(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	for _, id := range []string{"old", "a", "b", "c"} {
		e := env.laneEntry(t, s, "fcm", id)
		if ok, err := s.Finish(env.ctx, e, stream.Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, At: t0}); err != nil || !ok {
			t.Fatalf("Finish %s = %v, %v", id, ok, err)
		}
	}
	rep, err := inspectorOf(s).Inspect(env.ctx, "old", 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Found() || !cmp.Equal(rep.Cut, []string{k.Results}) {
		t.Errorf("Inspect old with limit 3: found %v, cut %v; want not found and the ledger cut", rep.Found(), rep.Cut)
	}
	rep, err = inspectorOf(s).Inspect(env.ctx, "c", 3)
	if err != nil || len(rep.Results) != 1 {
		t.Errorf("Inspect c (the newest) with limit 3: %+v, %v; want its record", rep, err)
	}
	if rep, err := inspectorOf(s).Inspect(env.ctx, "old", 4); err != nil || len(rep.Results) != 1 || len(rep.Cut) != 0 {
		t.Errorf("Inspect old with limit 4 (exactly the ledger): %+v, %v; want its record and no cut", rep, err)
	}
}

// deadJob dead-letters job id (whose JSON is raw) from the intake of its shard, as the intake
// does with an invalid job; an entry over the entry limit is dead-lettered by the read itself,
// its job cut.
func (e *env) deadJob(t *testing.T, s *stream.Store, id, raw, code, reason string) {
	t.Helper()
	shard := stream.ShardOf(id, s.Shards())
	if err := e.c.XAdd(e.ctx, redisXAdd(s.Keys(shard).Intake, raw)).Err(); err != nil {
		t.Fatal(err)
	}
	got, refused, err := s.ReadIntake(e.ctx, shard, job.ClassTransactional, 1, 0)
	if err == nil && len(got) == 0 && len(refused) == 1 && len(raw) > 65536 {
		return
	}
	if err != nil || len(got) != 1 {
		t.Fatalf("ReadIntake shard %d: %v, %v", shard, got, err)
	}
	if ok, err := s.ToDead(e.ctx, got[0], stream.DeadRecord{ID: id, Code: code, Reason: reason, Job: raw, At: t0}); err != nil || !ok {
		t.Fatalf("ToDead %s = %v, %v", id, ok, err)
	}
}

func TestDeadListReplayAndPurge(t *testing.T) {
	env := newEnv(t)
	s := env.store(t, "w1", stream.Options{Shards: 3})
	records := []struct{ id, code, reason string }{
		{"j1", "INVALID_JOB", "vapid_key: no key named \"legacy\" is configured"},
		{"j2", "PROVIDER_DOWN", "gave up after 9 attempts: PROVIDER_DOWN 503"},
		{"j3", "RATE_LIMITED", "recipient r1 has 1000 jobs waiting to retry"},
		{"j4", "PROVIDER_DOWN", "gave up after 9 attempts: TRANSPORT_ERROR"},
	}
	for _, r := range records {
		env.deadJob(t, s, r.id, validJob(r.id), r.code, r.reason)
	}
	// A job over the entry limit: its record's job is cut, with a note.
	big := `{"id":"big","payload":"` + strings.Repeat("p", 70_000) + `"}`
	env.deadJob(t, s, "big", big, "INVALID_JOB", "")

	ids := func(ds []DeadEntry) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		return out
	}
	// Records of different shards written in the same millisecond have no order between them:
	// the list is compared as a set, and checked to be newest first by entry id.
	all, err := inspectorOf(s).DeadList(env.ctx, DeadFilter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(all); i++ {
		if scan.CompareIDs(all[i-1].EntryID, all[i].EntryID) < 0 {
			t.Errorf("DeadList is not newest first: %s before %s", all[i-1].EntryID, all[i].EntryID)
		}
	}
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	for _, tc := range []struct {
		name  string
		f     DeadFilter
		limit int
		want  []string
	}{
		{"all", DeadFilter{}, 0, []string{"big", "j1", "j2", "j3", "j4"}},
		{"limit: the newest", DeadFilter{}, 2, ids(all[:2])},
		{"code", DeadFilter{Code: "PROVIDER_DOWN"}, 0, []string{"j2", "j4"}},
		{"reason", DeadFilter{Reason: "vapid_key"}, 0, []string{"j1"}},
		{"code and reason", DeadFilter{Code: "PROVIDER_DOWN", Reason: "TRANSPORT"}, 0, []string{"j4"}},
		{"provider", DeadFilter{Provider: "fcm"}, 0, nil},
		{"since the future", DeadFilter{Since: time.Now().Add(time.Hour)}, 0, nil},
		{"until the past", DeadFilter{Until: time.Now().Add(-time.Hour)}, 0, nil},
		{"since the past", DeadFilter{Since: time.Now().Add(-time.Hour), Code: "RATE_LIMITED"}, 0, []string{"j3"}},
	} {
		got, err := inspectorOf(s).DeadList(env.ctx, tc.f, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, ids(got), sorted, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}

	list, err := inspectorOf(s).DeadList(env.ctx, DeadFilter{Code: "PROVIDER_DOWN"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Replayed twice: each record moves to its intake once, as the job exactly.
	for round := range 2 {
		for _, d := range list {
			v, intakeID, err := inspectorOf(s).ReplayDead(env.ctx, d.Shard, d.EntryID)
			want := Replayed
			if round == 1 {
				want = ReplayGone
			}
			if err != nil || v != want || (v == Replayed) != (intakeID != "") {
				t.Fatalf("round %d: ReplayDead %s = %v, %q, %v; want %v", round, d.ID, v, intakeID, err, want)
			}
		}
	}
	for _, rec := range list {
		var jobs []map[string]string
		for _, m := range env.entries(t, s.Keys(rec.Shard).Intake) {
			jobs = append(jobs, fieldsOf(m))
		}
		if d := cmp.Diff([]map[string]string{{"job": validJob(rec.ID)}}, jobs); d != "" {
			t.Errorf("intake of shard %d after replaying %s twice (-want +got):\n%s", rec.Shard, rec.ID, d)
		}
		if _, ok, err := inspectorOf(s).DeadEntry(env.ctx, rec.Shard, rec.EntryID); ok || err != nil {
			t.Errorf("the replayed record %s is still there (%v)", rec.EntryID, err)
		}
	}
	// The cut record cannot be replayed, and stays.
	cut, err := inspectorOf(s).DeadList(env.ctx, DeadFilter{Reason: "65536"}, 0)
	if err != nil || len(cut) != 1 || !strings.HasPrefix(cut[0].Note, "job cut to its first") {
		t.Fatalf("the big record: %+v, %v; want one with a note", cut, err)
	}
	if v, _, err := inspectorOf(s).ReplayDead(env.ctx, cut[0].Shard, cut[0].EntryID); err != nil || v != ReplayCut {
		t.Errorf("ReplayDead of a cut record = %v, %v; want %v", v, err, ReplayCut)
	}
	if found, err := inspectorOf(s).DeadEntries(env.ctx, cut[0].EntryID); err != nil || len(found) != 1 {
		t.Errorf("the cut record after a refused replay: %v, %v; want it still there", found, err)
	}
	// Purge: by entry id, counted; a second purge finds nothing.
	left, _ := inspectorOf(s).DeadList(env.ctx, DeadFilter{}, 0)
	if d := cmp.Diff([]string{"big", "j1", "j3"}, ids(left), sorted); d != "" {
		t.Errorf("left after the replay (-want +got):\n%s", d)
	}
	for _, d := range left {
		if n, err := inspectorOf(s).PurgeDead(env.ctx, d.Shard, d.EntryID); err != nil || n != 1 {
			t.Errorf("PurgeDead %s = %d, %v", d.ID, n, err)
		}
		if n, err := inspectorOf(s).PurgeDead(env.ctx, d.Shard, d.EntryID); err != nil || n != 0 {
			t.Errorf("second PurgeDead %s = %d, %v; want 0", d.ID, n, err)
		}
	}
	if left, _ := inspectorOf(s).DeadList(env.ctx, DeadFilter{}, 0); len(left) != 0 {
		t.Errorf("%d records after purging every one", len(left))
	}
}

// TestDeadOfJobNewestFirst: a job dead-lettered twice (replayed and refused again) has two
// records, the newest first, and a scan limit cuts the older.
func TestDeadOfJobNewestFirst(t *testing.T) {
	env, s := newStore(t)
	env.deadJob(t, s, "j", validJob("j"), "INVALID_JOB", "first")
	env.deadJob(t, s, "other", validJob("other"), "INVALID_JOB", "other")
	env.deadJob(t, s, "j", validJob("j"), "INVALID_JOB", "second")
	got, cut, err := inspectorOf(s).DeadOfJob(env.ctx, "j", 0)
	if err != nil || cut || len(got) != 2 || got[0].Reason != "second" || got[1].Reason != "first" {
		t.Fatalf("DeadOfJob = %+v, cut %v, %v; want second then first", got, cut, err)
	}
	got, cut, err = inspectorOf(s).DeadOfJob(env.ctx, "j", 2)
	if err != nil || !cut || len(got) != 1 || got[0].Reason != "second" {
		t.Fatalf("DeadOfJob limit 2 = %+v, cut %v, %v; want the newest and a cut", got, cut, err)
	}
}

func TestRecordedShardsAndLanes(t *testing.T) {
	env := newEnv(t)
	reader := stream.New(env.c, nil, stream.Options{Shards: 4})
	if n, err := inspectorOf(reader).RecordedShards(env.ctx); err != nil || n != 0 {
		t.Fatalf("RecordedShards before any worker = %d, %v; want 0", n, err)
	}
	if err := inspectorOf(reader).VerifyShards(env.ctx); err != nil {
		t.Fatalf("VerifyShards with nothing recorded: %v", err)
	}
	before := env.snapshot(t)
	if _, err := inspectorOf(reader).AllLanes(env.ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, env.snapshot(t)); d != "" {
		t.Errorf("a reader wrote (-before +after):\n%s", d)
	}
	w := env.store(t, "w1", stream.Options{Shards: 4}, "fcm", "apple")
	// A lane of a provider the registry lost, on shard 2 only, and a key that only looks like a
	// lane.
	if err := env.c.XAdd(env.ctx, redisXAdd(w.Keys(2).Lane("retired"), "{}")).Err(); err != nil {
		t.Fatal(err)
	}
	env.c.Set(env.ctx, "wp:{9}:lane:ghost", "x", 0)
	env.c.Set(env.ctx, "wpx:{1}:lane:other-prefix", "x", 0)
	if n, err := inspectorOf(reader).RecordedShards(env.ctx); err != nil || n != 4 {
		t.Fatalf("RecordedShards = %d, %v; want 4", n, err)
	}
	lanes, err := inspectorOf(reader).AllLanes(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][]string{0: {"apple", "fcm"}, 1: {"apple", "fcm"}, 2: {"apple", "fcm", "retired"}, 3: {"apple", "fcm"}}
	if d := cmp.Diff(want, lanes); d != "" {
		t.Errorf("AllLanes (-want +got):\n%s", d)
	}
	if err := New(env.c, stream.Options{Shards: 2}).VerifyShards(env.ctx); err == nil || !strings.Contains(err.Error(), "use --shards 4") {
		t.Errorf("VerifyShards with 2 of 4: %v", err)
	}
}

// TestOperatorQueriesOnACluster: the scans and INFO go to every node of a cluster.
func TestOperatorQueriesOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cl := redistest.StartCluster(t, redistest.ClusterMasters(3), redistest.ClusterReplicas(0))
	s, err := stream.Open(cl.URL(), stream.OpenOptions{Options: stream.Options{Shards: 8, Consumer: "w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Setup(context.Background(), []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	lanes, err := inspectorOf(s).AllLanes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(lanes) != 8 {
		t.Errorf("AllLanes found the lanes of %d shards, want 8 (spread over 3 masters): %v", len(lanes), lanes)
	}
	mem, err := stream.KeyspaceOf(s).Memory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) != 3 {
		t.Fatalf("Memory = %+v; want the 3 nodes", mem)
	}
	for i, m := range mem {
		if m.Addr == "" || m.Role != "master" || m.UsedMemory <= 0 || (i > 0 && mem[i-1].Addr >= m.Addr) {
			t.Errorf("node %d: %+v; want a master's figures, sorted by address", i, m)
		}
	}
}
