package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// deadSet is a known set of dead records on two shards, made as the worker makes them.
type deadSet struct {
	srv  *redistest.Server
	st   *stream.Store
	sim  *pushsim.Server
	key  string                      // the VAPID key file the pushsim subscriptions were made with
	jobs map[string]string           // job id -> its JSON
	subs map[string]job.Subscription // job id -> its pushsim subscription
}

func newDeadSet(t *testing.T) *deadSet {
	t.Helper()
	ctx := context.Background()
	d := &deadSet{srv: redistest.Start(t), jobs: map[string]string{}, subs: map[string]job.Subscription{}}
	sim := simtest.Start(t, pushsim.Config{})
	d.sim = sim
	d.key = filepath.Join(t.TempDir(), "vapid.pem")
	code, pub, stderr := run(t, "keygen", "--out", d.key)
	if code != 0 {
		t.Fatalf("keygen: %s", stderr)
	}
	d.st = stream.New(d.srv.Client(t), nil, stream.Options{Shards: 2, Consumer: "worker-a"})
	if err := d.st.Setup(ctx, []string{"apple", "fcm"}); err != nil {
		t.Fatal(err)
	}
	// One from a lane per job: the retries were used up, or a cap refused one.
	fromLane := func(id, provider, code, reason string) {
		t.Helper()
		sub, err := sim.Subscribe("apple", "", strings.TrimSpace(pub))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"id": id, "subscription": sub, "payload": "replayed " + id})
		d.jobs[id], d.subs[id] = string(b), sub
		shard := stream.ShardOf(id, 2)
		if _, err := d.st.Producer().Enqueue(ctx, b); err != nil {
			t.Fatal(err)
		}
		in, _, err := d.st.ReadIntake(ctx, shard, job.ClassTransactional, 1, 0)
		if err != nil || len(in) != 1 {
			t.Fatalf("ReadIntake: %v, %v", in, err)
		}
		if v, err := d.st.ToLane(ctx, in[0], provider, job.ClassTransactional, id, string(b), time.Now().UnixMilli()); err != nil || v != stream.Moved {
			t.Fatalf("ToLane: %v, %v", v, err)
		}
		lane, _, err := d.st.ReadLanes(ctx, shard, provider, stream.LaneRead{Total: 1})
		if err != nil || len(lane) != 1 {
			t.Fatalf("ReadLane: %v, %v", lane, err)
		}
		if ok, err := d.st.ToDead(ctx, lane[0], stream.DeadRecord{ID: id, Code: code, Reason: reason, Attempt: 8, Provider: provider,
			Job: string(b), At: time.Now()}); err != nil || !ok {
			t.Fatalf("ToDead: %v, %v", ok, err)
		}
	}
	// One from the intake: invalid, or over the entry limit (dead-lettered by the read).
	fromIntake := func(id, raw, reason string) {
		t.Helper()
		d.jobs[id] = raw
		if _, err := d.st.Producer().Enqueue(ctx, []byte(raw)); err != nil {
			t.Fatal(err)
		}
		in, refused, err := d.st.ReadIntake(ctx, stream.ShardOf(id, 2), job.ClassTransactional, 1, 0)
		if err != nil || len(in)+len(refused) != 1 {
			t.Fatalf("ReadIntake: %v, %v, %v", in, refused, err)
		}
		if len(in) == 1 {
			if ok, err := d.st.ToDead(ctx, in[0], stream.DeadRecord{ID: id, Code: "INVALID_JOB", Reason: reason, Job: raw, At: time.Now()}); err != nil || !ok {
				t.Fatalf("ToDead: %v, %v", ok, err)
			}
		}
	}
	fromLane("gave-up-1", "apple", "PROVIDER_DOWN", "gave up after 9 attempts: PROVIDER_DOWN 503: unavailable")
	fromIntake("invalid", strings.Replace(testJob(t, "invalid"), `"payload"`, `"ttl":-5,"payload"`, 1), "ttl: must be at least 0, got -5")
	fromLane("gave-up-2", "apple", "PROVIDER_DOWN", "gave up after 9 attempts: TRANSPORT_ERROR: connection reset")
	fromLane("throttled", "fcm", "RATE_LIMITED", "recipient r1 has 1000 jobs waiting to retry")
	fromIntake("huge", `{"id":"huge","payload":"`+strings.Repeat("p", 70_000)+`"}`, "")
	return d
}

// refs lists the records `dead ls --json` prints, by job id.
func (d *deadSet) refs(t *testing.T, args ...string) map[string]deadView {
	t.Helper()
	code, stdout, stderr := run(t, append([]string{"dead", "ls", "--redis", d.srv.URL(), "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("dead ls --json %v: exit %d: %s", args, code, stderr)
	}
	var out struct{ Records []deadView }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("dead ls --json printed %q: %v", stdout, err)
	}
	m := map[string]deadView{}
	for _, r := range out.Records {
		m[r.ID] = r
	}
	return m
}

func ref(r deadView) string { return fmt.Sprintf("%d/%s", r.Shard, r.EntryID) }

func TestDeadLsFilters(t *testing.T) {
	d := newDeadSet(t)
	ids := func(m map[string]deadView) []string {
		var out []string
		for id := range m {
			out = append(out, id)
		}
		return out
	}
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"gave-up-1", "gave-up-2", "huge", "invalid", "throttled"}},
		{[]string{"--code", "PROVIDER_DOWN"}, []string{"gave-up-1", "gave-up-2"}},
		{[]string{"--provider", "fcm"}, []string{"throttled"}},
		{[]string{"--reason", "got -5"}, []string{"invalid"}},
		{[]string{"--code", "PROVIDER_DOWN", "--reason", "TRANSPORT"}, []string{"gave-up-2"}},
		{[]string{"--since", "1h"}, []string{"gave-up-1", "gave-up-2", "huge", "invalid", "throttled"}},
		{[]string{"--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, nil},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--limit", "2"}, nil}, // checked below: two of the five
	} {
		got := d.refs(t, tc.args...)
		if len(tc.args) == 2 && tc.args[0] == "--limit" {
			if len(got) != 2 {
				t.Errorf("--limit 2: %d records", len(got))
			}
			continue
		}
		if diff := cmp.Diff(tc.want, ids(got), sorted, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("dead ls %v (-want +got):\n%s", tc.args, diff)
		}
	}
	all := d.refs(t)
	if r := all["gave-up-1"]; r.Code != "PROVIDER_DOWN" || r.Provider != "apple" || r.Attempt != 8 || r.Job != nil ||
		!strings.HasSuffix(r.From, ":lane:apple") || time.Since(r.At) > time.Minute {
		t.Errorf("gave-up-1 as listed: %+v; want its code, provider, attempt and lane, and no job", r)
	}
	if r := all["huge"]; !strings.HasPrefix(r.Note, "job cut to its first 4096 of ") {
		t.Errorf("huge as listed: %+v; want its note", r)
	}

	code, stdout, _ := run(t, "dead", "ls", "--redis", d.srv.URL())
	for _, re := range []string{
		`(?m)^ENTRY +JOB +CODE +PROVIDER +AT +REASON$`,
		`(?m)^[01]/\d+-\d+ +gave-up-2 +PROVIDER_DOWN +apple +\S+Z +gave up after 9 attempts: TRANSPORT_ERROR: connection reset$`,
		`(?m)^[01]/\d+-\d+ +invalid +INVALID_JOB +- +`,
		`\[job cut: cannot be replayed\]`,
		`(?m)^5 records$`,
	} {
		if code != 0 || !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("dead ls: exit %d, output lacks %s:\n%s", code, re, stdout)
		}
	}
	_, stdout, _ = run(t, "dead", "ls", "--redis", d.srv.URL(), "--limit", "2")
	if !strings.Contains(stdout, "2 records shown, newest first; more match (--limit 2; --limit 0 lists all)") {
		t.Errorf("dead ls --limit 2:\n%s", stdout)
	}
	_, stdout, _ = run(t, "dead", "ls", "--redis", d.srv.URL(), "--until", "2h")
	if !strings.Contains(stdout, "no dead record matches") {
		t.Errorf("dead ls --until 2h:\n%s", stdout)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--since", "yesterday"}}, {[]string{"--until", "-5m"}}, {[]string{"--limit", "-1"}},
		{[]string{"--since", "1h", "--until", "2h"}},
	} {
		code, _, stderr := run(t, append([]string{"dead", "ls", "--redis", d.srv.URL()}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.args[0]) {
			t.Errorf("dead ls %v: exit %d, %q; want 2 naming %s", tc.args, code, stderr, tc.args[0])
		}
	}
}

func TestDeadShow(t *testing.T) {
	d := newDeadSet(t)
	r := d.refs(t)["gave-up-1"]
	code, stdout, _ := run(t, "dead", "show", "--redis", d.srv.URL(), ref(r))
	for _, want := range []string{"entry     " + ref(r) + " of wp:{", "id        gave-up-1", "code      PROVIDER_DOWN",
		"reason    gave up after 9 attempts: PROVIDER_DOWN 503: unavailable", "provider  apple", "attempt   8",
		"job       " + d.jobs["gave-up-1"] + "\n"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("dead show %s: exit %d, output lacks %q:\n%s", ref(r), code, want, stdout)
		}
	}
	// By job id, as JSON: the job whole.
	code, stdout, _ = run(t, "dead", "show", "--redis", d.srv.URL(), "--json", "invalid")
	var rec deadView
	if err := json.Unmarshal([]byte(stdout), &rec); code != 0 || err != nil || rec.Job == nil || *rec.Job != d.jobs["invalid"] || rec.Code != "INVALID_JOB" {
		t.Errorf("dead show --json invalid: exit %d, %s (%v)", code, stdout, err)
	}
	if code, _, stderr := run(t, "dead", "show", "--redis", d.srv.URL(), "no-such-job"); code != 1 || !strings.Contains(stderr, "no dead record no-such-job") {
		t.Errorf("dead show of nothing: exit %d, %q", code, stderr)
	}
	if code, _, stderr := run(t, "dead", "show", "--redis", d.srv.URL(), "7/1-0"); code != 2 || !strings.Contains(stderr, "shard 7 is not one of the 2 shards") {
		t.Errorf("dead show of shard 7: exit %d, %q", code, stderr)
	}
}

// TestDeadReplayMovesEachRecordOnce: replayed twice, each chosen record is on its intake once,
// exactly its job; a record whose job was cut stays; and the replayed jobs are delivered by a
// real worker through pushsim, after which inspect finds their ledger records.
func TestDeadReplayMovesEachRecordOnce(t *testing.T) {
	d := newDeadSet(t)
	ctx := context.Background()
	recs := d.refs(t)
	one, two := ref(recs["gave-up-1"]), ref(recs["gave-up-2"])

	code, stdout, stderr := run(t, "dead", "replay", "--redis", d.srv.URL(), "--dry-run", one, two)
	if code != 0 || !strings.Contains(stdout, "would replay 2 records") || len(d.refs(t)) != 5 {
		t.Fatalf("replay --dry-run: exit %d, %q, %q; want it listed and nothing changed", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, "dead", "replay", "--redis", d.srv.URL(), one, two)
	if code != 0 || !strings.Contains(stdout, "replayed 2 records; 0 skipped; 0 already gone") ||
		!strings.Contains(stdout, "replayed "+one+" (job gave-up-1) as wp:{") {
		t.Fatalf("replay: exit %d, %q, %q", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, "dead", "replay", "--redis", d.srv.URL(), one, two)
	if code != 1 || !strings.Contains(stdout, "replayed 0 records; 0 skipped; 0 already gone (replayed or purged before); 2 entry ids not found") ||
		!strings.Contains(stderr, one+": no such record") || !strings.Contains(stderr, two+": no such record") {
		t.Fatalf("second replay: exit %d, %q, %q; want nothing replayed, both named as not found, exit 1", code, stdout, stderr)
	}
	// Each job is on its shard's intake once, exactly as it was enqueued.
	c := d.srv.Client(t)
	got := map[string][]string{}
	for shard := range 2 {
		for _, m := range c.XRange(ctx, stream.KeysFor("wp", shard).Intake, "-", "+").Val() {
			raw, _ := m.Values["job"].(string)
			var j struct{ ID string }
			_ = json.Unmarshal([]byte(raw), &j)
			got[j.ID] = append(got[j.ID], raw)
			if len(m.Values) != 1 || stream.ShardOf(j.ID, 2) != shard {
				t.Errorf("intake entry %v of shard %d: want one job field, on the job's shard", m.Values, shard)
			}
		}
	}
	want := map[string][]string{"gave-up-1": {d.jobs["gave-up-1"]}, "gave-up-2": {d.jobs["gave-up-2"]}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("intake after two replays (-want +got):\n%s", diff)
	}
	// The cut record: skipped, named, kept.
	code, _, stderr = run(t, "dead", "replay", "--redis", d.srv.URL(), "--reason", "65536")
	if code != 1 || !strings.Contains(stderr, "(job huge): its record keeps only the first bytes of its job; it cannot be replayed") {
		t.Errorf("replay of the cut record: exit %d, %q; want 1 and the record named", code, stderr)
	}
	if _, ok := d.refs(t)["huge"]; !ok {
		t.Error("the cut record is gone after a refused replay")
	}

	// A real worker delivers the replayed jobs.
	t.Setenv("GATEWAY_CA_FILE", d.sim.CAFile())
	t.Setenv("GATEWAY_CONNECT_TO", strings.Join(d.sim.ConnectTo(), ","))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wout, werr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runMain(wctx, []string{"run", "--http", "", "--redis", d.srv.URL(), "--shards", "2", "--vapid-key", d.key,
			"--subject", "mailto:ops@example.com", "--block", "100ms", "--grace", "1s"}, &wout, &werr)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		for shard := range 2 {
			n += c.XLen(ctx, stream.KeysFor("wp", shard).Results).Val()
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ledger records after 30 s, want 2:\n%s", n, werr.String())
		}
		select {
		case code := <-done:
			t.Fatalf("run exited %d:\n%s", code, werr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d:\n%s", code, werr.String())
	}
	for _, id := range []string{"gave-up-1", "gave-up-2"} {
		if ds := d.sim.DeliveriesFor(d.subs[id].Endpoint); len(ds) != 1 || string(ds[0].Plaintext) != "replayed "+id {
			t.Errorf("pushsim deliveries of %s: %+v; want the one push", id, ds)
		}
		code, stdout, _ := run(t, "inspect", "--redis", d.srv.URL(), id)
		if code != 0 || !strings.Contains(stdout, "ended: ACCEPTED (HTTP 201) on apple at attempt 0") || strings.Contains(stdout, "dead-lettered") {
			t.Errorf("inspect %s after the replay: exit %d:\n%s", id, code, stdout)
		}
	}
}

func TestDeadPurge(t *testing.T) {
	d := newDeadSet(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "choose the records: ENTRY_ID..., a filter"},
		{[]string{"--all"}, "--all deletes every dead record: add --yes"},
		{[]string{"--all", "--code", "PROVIDER_DOWN"}, "choose the records one way"},
		{[]string{"1-0", "--code", "PROVIDER_DOWN"}, "choose the records one way"},
		{[]string{"order-1"}, `"order-1" is not an entry id`},
	} {
		code, _, stderr := run(t, append([]string{"dead", "purge", "--redis", d.srv.URL()}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("dead purge %v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if code, _, stderr := run(t, "dead", "replay", "--redis", d.srv.URL()); code != 2 || !strings.Contains(stderr, "choose the records") {
		t.Errorf("dead replay with no selector: exit %d, %q", code, stderr)
	}
	if len(d.refs(t)) != 5 {
		t.Fatal("a refused purge deleted records")
	}
	code, stdout, _ := run(t, "dead", "purge", "--redis", d.srv.URL(), "--code", "INVALID_JOB", "--reason", "ttl")
	if code != 0 || !strings.Contains(stdout, "purged 1 records") {
		t.Errorf("purge --code INVALID_JOB --reason ttl: exit %d, %q", code, stdout)
	}
	r := d.refs(t)["throttled"]
	if code, stdout, _ := run(t, "dead", "purge", "--redis", d.srv.URL(), ref(r)); code != 0 || !strings.Contains(stdout, "purged 1 records") {
		t.Errorf("purge %s: exit %d, %q", ref(r), code, stdout)
	}
	code, stdout, _ = run(t, "dead", "purge", "--redis", d.srv.URL(), "--all", "--yes")
	if code != 0 || !strings.Contains(stdout, "purged 3 records") {
		t.Errorf("purge --all --yes: exit %d, %q", code, stdout)
	}
	if code, stdout, _ := run(t, "dead", "ls", "--redis", d.srv.URL()); code != 0 || !strings.Contains(stdout, "no dead record matches") {
		t.Errorf("dead ls after purging all: exit %d, %q", code, stdout)
	}
}

// TestDeadPurgeAndReplayWalkLongStreams: replay and purge of every record a filter (or --all)
// chooses reach every record of dead streams longer than a page of reads and a batch of
// deletes, on every shard, and only those.
func TestDeadPurgeAndReplayWalkLongStreams(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	perShard := map[int]int{0: 1300, 1: 900} // more than a page (1000) and a purge batch
	for shard, n := range perShard {
		p := c.Pipeline()
		for i := range n {
			code := "PROVIDER_DOWN"
			if i%2 == 1 {
				code = "INVALID_JOB"
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: stream.KeysFor("wp", shard).Dead, Values: []any{
				"id", fmt.Sprintf("j-%d-%d", shard, i), "code", code, "reason", "test", "job", `{"id":"x"}`, "at", time.Now().UnixMilli()}})
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Set(ctx, stream.ShardsKey("wp"), 2, 0)
	left := func() (down, invalid int64) {
		for shard := range perShard {
			msgs, err := c.XRange(ctx, stream.KeysFor("wp", shard).Dead, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Values["code"] == "PROVIDER_DOWN" {
					down++
				} else {
					invalid++
				}
			}
		}
		return down, invalid
	}
	code, stdout, stderr := run(t, "dead", "purge", "--redis", srv.URL(), "--code", "PROVIDER_DOWN")
	if code != 0 || !strings.HasSuffix(stdout, "purged 1100 records\n") {
		t.Fatalf("purge --code PROVIDER_DOWN: exit %d, %q, %q; want 1100 purged", code, stdout, stderr)
	}
	if down, invalid := left(); down != 0 || invalid != 1100 {
		t.Fatalf("after purging PROVIDER_DOWN: %d PROVIDER_DOWN and %d INVALID_JOB left; want 0 and 1100", down, invalid)
	}
	if code, stdout, _ := run(t, "dead", "replay", "--redis", srv.URL(), "--all", "--include-invalid", "--dry-run"); code != 0 ||
		!strings.HasSuffix(stdout, "would replay 1100 records; 0 skipped; 0 already gone (replayed or purged before)\n") {
		t.Errorf("replay --all --include-invalid --dry-run: exit %d, ...%q", code, stdout[max(len(stdout)-200, 0):])
	}
	// Without --include-invalid every one of them (all INVALID_JOB) is skipped, and stays.
	if code, stdout, _ := run(t, "dead", "replay", "--redis", srv.URL(), "--all"); code != 0 ||
		!strings.HasSuffix(stdout, "replayed 0 records; 1100 skipped (1100 would fail the same way again: --include-invalid); 0 already gone (replayed or purged before)\n") {
		t.Errorf("replay --all: exit %d, ...%q", code, stdout[max(len(stdout)-200, 0):])
	}
	if _, invalid := left(); invalid != 1100 {
		t.Fatalf("replay --all without --include-invalid left %d INVALID_JOB records; want 1100", invalid)
	}
	code, stdout, _ = run(t, "dead", "replay", "--redis", srv.URL(), "--all", "--include-invalid")
	if code != 0 || !strings.HasSuffix(stdout, "replayed 1100 records; 0 skipped; 0 already gone (replayed or purged before)\n") {
		t.Errorf("replay --all --include-invalid: exit %d, ...%q", code, stdout[max(len(stdout)-200, 0):])
	}
	var intake int64
	for shard := range perShard {
		intake += c.XLen(ctx, stream.KeysFor("wp", shard).Intake).Val()
	}
	if down, invalid := left(); down != 0 || invalid != 0 || intake != 1100 {
		t.Errorf("after replay --all: %d + %d records left, %d jobs on the intakes; want none and 1100", down, invalid, intake)
	}
}

// intakeJobs returns the ids of the jobs on the intakes of both shards.
func intakeJobs(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	got := map[string]int{}
	for shard := range 2 {
		for _, m := range c.XRange(context.Background(), stream.KeysFor("wp", shard).Intake, "-", "+").Val() {
			raw, _ := m.Values["job"].(string)
			var j struct{ ID string }
			_ = json.Unmarshal([]byte(raw), &j)
			got[j.ID]++
		}
	}
	return got
}

// TestDeadReplaySkipsWhatFailsAgain: a record whose code says its job would fail the same way
// again (INVALID_JOB here) is skipped with the reason, counted, and kept, whether named by
// entry id or chosen by --all, and --include-invalid replays it.
func TestDeadReplaySkipsWhatFailsAgain(t *testing.T) {
	d := newDeadSet(t)
	c := d.srv.Client(t)
	recs := d.refs(t)
	invalid, one := ref(recs["invalid"]), ref(recs["gave-up-1"])

	code, stdout, stderr := run(t, "dead", "replay", "--redis", d.srv.URL(), invalid, one)
	if code != 0 || !strings.Contains(stdout, "replayed 1 records; 1 skipped (1 would fail the same way again: --include-invalid); 0 already gone") ||
		!strings.Contains(stderr, "skipped "+invalid+" (job invalid, INVALID_JOB): an invalid job is refused again; --include-invalid replays it") {
		t.Fatalf("replay of an invalid and a gave-up record: exit %d, %q, %q", code, stdout, stderr)
	}
	if got := intakeJobs(t, c); !cmp.Equal(got, map[string]int{"gave-up-1": 1}) {
		t.Errorf("intake after the replay: %v; want gave-up-1 only", got)
	}
	if _, ok := d.refs(t)["invalid"]; !ok {
		t.Fatal("the skipped invalid record is gone")
	}

	// --all honours it too; the cut record is the only failure.
	code, stdout, stderr = run(t, "dead", "replay", "--redis", d.srv.URL(), "--all")
	if code != 1 || !strings.Contains(stdout, "replayed 2 records; 2 skipped (1 would fail the same way again: --include-invalid)") ||
		!strings.Contains(stderr, "(job invalid, INVALID_JOB): an invalid job is refused again") || !strings.Contains(stderr, "(job huge): its record keeps only the first bytes of its job") {
		t.Fatalf("replay --all: exit %d, %q, %q", code, stdout, stderr)
	}
	if got := d.refs(t); len(got) != 2 || got["invalid"].ID == "" || got["huge"].ID == "" {
		t.Errorf("dead records after replay --all: %v; want invalid and huge", got)
	}

	// The dry run says the same, and --include-invalid replays it.
	code, stdout, stderr = run(t, "dead", "replay", "--redis", d.srv.URL(), "--dry-run", invalid)
	if code != 0 || !strings.Contains(stdout, "would replay 0 records; 1 skipped (1 would fail") || !strings.Contains(stderr, "skipped "+invalid) {
		t.Errorf("replay --dry-run of the invalid record: exit %d, %q, %q", code, stdout, stderr)
	}
	code, stdout, stderr = run(t, "dead", "replay", "--redis", d.srv.URL(), "--include-invalid", invalid)
	if code != 0 || !strings.Contains(stdout, "replayed 1 records; 0 skipped; 0 already gone") {
		t.Fatalf("replay --include-invalid: exit %d, %q, %q", code, stdout, stderr)
	}
	if got := intakeJobs(t, c); got["invalid"] != 1 {
		t.Errorf("intake after replay --include-invalid: %v; want the invalid job once", got)
	}
}

// TestDeadReplayNamesMissingIDs: an entry id that names no record (mistyped, or replayed
// before) makes the replay exit 1 naming it, and the ids that were found are still replayed.
func TestDeadReplayNamesMissingIDs(t *testing.T) {
	d := newDeadSet(t)
	one := ref(d.refs(t)["gave-up-1"])
	code, stdout, stderr := run(t, "dead", "replay", "--redis", d.srv.URL(), "1/1-0", one)
	if code != 1 || !strings.Contains(stderr, "1/1-0: no such record") || !strings.Contains(stdout, "replayed "+one+" (job gave-up-1)") ||
		!strings.Contains(stdout, "replayed 1 records; 0 skipped; 0 already gone (replayed or purged before); 1 entry ids not found") {
		t.Fatalf("replay of a missing and a present id: exit %d, %q, %q; want 1, the missing one named, the other replayed", code, stdout, stderr)
	}
	if got := intakeJobs(t, d.srv.Client(t)); !cmp.Equal(got, map[string]int{"gave-up-1": 1}) {
		t.Errorf("intake: %v; want gave-up-1", got)
	}
	// Replayed already: not found either.
	if code, _, stderr := run(t, "dead", "replay", "--redis", d.srv.URL(), one); code != 1 || !strings.Contains(stderr, one+": no such record") {
		t.Errorf("replay of a replayed id: exit %d, %q; want 1 naming it", code, stderr)
	}
}
