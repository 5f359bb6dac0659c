package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// testJob is a valid job for the subscription of testdata/sub.json.
func testJob(t *testing.T, id string) string {
	t.Helper()
	sub, err := os.ReadFile("testdata/sub.json")
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"id":%q,"subscription":%s,"payload":"hello"}`, id, strings.TrimSpace(string(sub)))
}

// backlog is a known state of one shard, made with stream's own functions as a worker makes it:
//
//	queued-1, queued-2   in the intake, not read
//	routing              in the intake, read by consumer worker-a, not routed
//	lane-1, lane-2       in lane:fcm, not read
//	flying               in lane:fcm, read by worker-a (in flight)
//	apple-1              in lane:apple, read by worker-a
//	retry                in the delayed set, due in an hour, after a PROVIDER_DOWN
//	done                 in the ledger, ACCEPTED
//	bad-1, bad-2         dead, INVALID_JOB
//
// and one live replica, worker-a, whose heartbeat publishes its breakers.
type backlog struct {
	srv  *redistest.Server
	st   *stream.Store
	insp *inspect.Inspector // the operators' view of the same Redis
	due  time.Time
}

func newBacklog(t *testing.T) *backlog {
	t.Helper()
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	st := stream.New(c, nil, stream.Options{Consumer: "worker-a"})
	if err := st.Setup(ctx, []string{"fcm", "apple"}); err != nil {
		t.Fatal(err)
	}
	p := st.Producer()
	enqueue := func(ids ...string) {
		t.Helper()
		var jobs [][]byte
		for _, id := range ids {
			jobs = append(jobs, []byte(testJob(t, id)))
		}
		if _, err := p.Enqueue(ctx, jobs...); err != nil {
			t.Fatal(err)
		}
	}
	read := func(n int) []stream.Entry {
		t.Helper()
		es, refused, err := st.ReadIntake(ctx, 0, job.ClassTransactional, n, 0)
		if err != nil || len(es) != n || len(refused) != 0 {
			t.Fatalf("ReadIntake %d: %v, %v, %v", n, es, refused, err)
		}
		return es
	}
	toLane := func(e stream.Entry, provider string) {
		t.Helper()
		raw := e.Fields["job"]
		var j struct{ ID string }
		_ = json.Unmarshal([]byte(raw), &j)
		if v, err := st.ToLane(ctx, e, provider, job.ClassTransactional, j.ID, raw, time.Now().UnixMilli()); err != nil || v != stream.Moved {
			t.Fatalf("ToLane %s: %v, %v", j.ID, v, err)
		}
	}
	readLane := func(provider string, n int) []stream.Entry {
		t.Helper()
		es, _, err := st.ReadLanes(ctx, 0, provider, stream.LaneRead{Total: n})
		if err != nil || len(es) != n {
			t.Fatalf("ReadLane %s %d: %v, %v", provider, n, es, err)
		}
		return es
	}

	enqueue("retry", "done", "flying", "apple-1", "bad-1", "bad-2", "lane-1", "lane-2")
	es := read(8)
	for _, e := range es[:3] {
		toLane(e, "fcm")
	}
	toLane(es[3], "apple")
	for i, e := range es[4:6] {
		if ok, err := st.ToDead(ctx, e, stream.DeadRecord{ID: fmt.Sprintf("bad-%d", i+1), Code: "INVALID_JOB",
			Reason: "ttl: must be at least 0, got -5", Job: e.Fields["job"], At: time.Now()}); err != nil || !ok {
			t.Fatalf("ToDead: %v, %v", ok, err)
		}
	}
	lane := readLane("fcm", 3) // retry, done, flying
	b := &backlog{srv: srv, st: st, insp: inspect.New(c, stream.Options{}), due: time.Now().Add(time.Hour).Truncate(time.Millisecond)}
	if v, err := st.ToDelayed(ctx, lane[0], stream.RetryRecord{ID: "retry", Provider: "fcm", Due: b.due, Attempt: 1,
		Job: lane[0].Fields["job"], EnqueuedAtMs: time.Now().UnixMilli(), Code: "PROVIDER_DOWN", Detail: "503 Service Unavailable"}); err != nil || v != stream.Queued {
		t.Fatalf("ToDelayed: %v, %v", v, err)
	}
	if ok, err := st.Finish(ctx, lane[1], stream.Result{ID: "done", Provider: "fcm", Code: "ACCEPTED", Status: 201, At: time.Now(), Sent: true}); err != nil || !ok {
		t.Fatalf("Finish: %v, %v", ok, err)
	}
	for _, e := range es[6:] {
		toLane(e, "fcm")
	}
	readLane("apple", 1)
	enqueue("routing")
	read(1)
	enqueue("queued-1", "queued-2")
	if _, err := st.Heartbeat(ctx, time.Now(), 5*time.Second, `{"version":"v-test","breakers":{"fcm":"closed","apple":"open"}}`); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStatusShowsTheBacklog(t *testing.T) {
	b := newBacklog(t)
	code, stdout, stderr := run(t, "status", "--redis", b.srv.URL(), "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d: %s", code, stderr)
	}
	var rep inspect.StatusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("status --json printed %q: %v", stdout, err)
	}
	type row struct {
		Stream                 string
		Length, Lag, Pending   int64
		OldestPending, NextDue bool
		DueNow                 int64
	}
	var rows []row
	for _, q := range rep.Queues {
		r := row{Stream: q.Stream, Length: q.Length, OldestPending: q.OldestPendingAt != nil, NextDue: q.NextDue != nil, Lag: -1, Pending: -1}
		if q.Lag != nil {
			r.Lag = *q.Lag
		}
		if q.Pending != nil {
			r.Pending = *q.Pending
		}
		if q.DueNow != nil {
			r.DueNow = *q.DueNow
		}
		rows = append(rows, r)
	}
	want := []row{
		{Stream: "intake", Length: 3, Lag: 2, Pending: 1, OldestPending: true},
		{Stream: "intake:bulk"},
		{Stream: "delayed", Length: 1, Lag: -1, Pending: -1, NextDue: true},
		{Stream: "dead", Length: 2, Lag: -1, Pending: -1},
		{Stream: "results", Length: 1, Lag: -1, Pending: -1},
		{Stream: "gone", Length: 0, Lag: -1, Pending: -1},
		{Stream: "lane:apple", Length: 1, Lag: 0, Pending: 1, OldestPending: true},
		{Stream: "lane:apple:bulk"},
		{Stream: "lane:fcm", Length: 3, Lag: 2, Pending: 1, OldestPending: true},
		{Stream: "lane:fcm:bulk"},
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Errorf("queues (-want +got):\n%s", d)
	}
	if rep.Queues[2].NextDue == nil || !rep.Queues[2].NextDue.Equal(b.due) {
		t.Errorf("delayed next due %v, want %v", rep.Queues[2].NextDue, b.due)
	}
	if len(rep.Replicas) != 1 || rep.Replicas[0].Consumer != "worker-a" || rep.Replicas[0].Version != "v-test" ||
		!cmp.Equal(rep.Replicas[0].Breakers, map[string]string{"fcm": "closed", "apple": "open"}) {
		t.Errorf("replicas %+v; want worker-a, v-test, fcm closed and apple open", rep.Replicas)
	}
	if len(rep.Memory) != 1 || rep.Memory[0].Node != b.srv.Addr() || rep.Memory[0].UsedBytes <= 0 || rep.Memory[0].Policy != "noeviction" {
		t.Errorf("memory %+v; want the one node's figures", rep.Memory)
	}
	if len(rep.Paused) != 0 || rep.Shards != 1 || rep.Prefix != "wp" {
		t.Errorf("paused %v, shards %d, prefix %q", rep.Paused, rep.Shards, rep.Prefix)
	}
	for _, key := range []string{`"oldest_pending_age_seconds"`, `"due_now"`, `"last_seen_seconds_ago"`, `"used_memory"`, `"maxmemory_policy"`} {
		if !strings.Contains(stdout, key) {
			t.Errorf("status --json lacks %s: %s", key, stdout)
		}
	}

	code, stdout, stderr = run(t, "status", "--redis", b.srv.URL())
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, re := range []string{
		`(?m)^SHARD +STREAM +LENGTH +LAG +PENDING +OLDEST PENDING +RETRIES$`,
		`(?m)^0 +intake +3 +2 +1 +[0-9.]+m?s ago`,
		`(?m)^0 +lane:fcm +3 +2 +1 +[0-9.]+m?s ago`,
		`(?m)^0 +delayed +1 +- +- +- +0 due now, next in (59m|1h0m)`,
		`(?m)^0 +dead +2 +- +-`,
		`replicas: 1 live \(heartbeat within 5s\)`,
		`(?m)^worker-a +[0-9.]+m?s ago +v-test +apple=open fcm=closed$`,
		`paused providers: none`,
		`(?m)^` + regexp.QuoteMeta(b.srv.Addr()) + ` +master +[0-9.]+ [KM]iB +[0-9.]+ [KM]iB +no limit +noeviction$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("status output lacks %s:\n%s", re, stdout)
		}
	}
}

func TestStatusTakesTheRecordedShardCount(t *testing.T) {
	srv := redistest.Start(t)
	st := stream.New(srv.Client(t), nil, stream.Options{Shards: 3, Consumer: "w"})
	if err := st.Setup(context.Background(), []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "status", "--redis", srv.URL(), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep inspect.StatusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Shards != 3 || len(rep.Queues) != 3*8 {
		t.Fatalf("status without --shards: %d shards, %d queues (%v); want the recorded 3 and 8 queues each (two intakes, fcm's two lanes)", rep.Shards, len(rep.Queues), err)
	}
	code, _, stderr = run(t, "status", "--redis", srv.URL(), "--shards", "2")
	if code != 2 || !strings.Contains(stderr, "is used with 3 shards") || !strings.Contains(stderr, "use --shards 3") {
		t.Errorf("status --shards 2 of 3: exit %d, %q; want 2 and the recorded count named", code, stderr)
	}
	if len(rep.LeftShards) != 0 {
		t.Errorf("left shards %v with every key within the count", rep.LeftShards)
	}

	// A shard beyond the count that still holds a job, as a shrink of the count leaves one
	// until it is drained: status shows its queues and says why.
	c := srv.Client(t)
	if err := c.XAdd(context.Background(), &redis.XAddArgs{Stream: stream.KeysFor("wp", 4).Intake, Values: []any{"job", `{"id":"x"}`}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = run(t, "status", "--redis", srv.URL(), "--json")
	rep = inspect.StatusReport{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || !cmp.Equal(rep.LeftShards, []int{4}) {
		t.Fatalf("status --json with a job in shard 4 of 3: left shards %v (%v); want [4]", rep.LeftShards, err)
	}
	var intake4 int64 = -1
	for _, q := range rep.Queues {
		if q.Shard == 4 && q.Stream == "intake" {
			intake4 = q.Length
		}
	}
	if intake4 != 1 {
		t.Errorf("shard 4's intake length %d in status; want 1", intake4)
	}
	_, stdout, _ = run(t, "status", "--redis", srv.URL())
	if !strings.Contains(stdout, "shards [4] are beyond the 3 in use and still hold jobs") {
		t.Errorf("status with a job in shard 4 of 3 does not say so:\n%s", stdout)
	}
	// Drained, the shard's emptied intake and its records stay as keys: no longer left.
	c.XTrimMaxLen(context.Background(), stream.KeysFor("wp", 4).Intake, 0)
	c.XAdd(context.Background(), &redis.XAddArgs{Stream: stream.KeysFor("wp", 4).Results, Values: []any{"id", "x", "code", "ACCEPTED"}})
	_, stdout, _ = run(t, "status", "--redis", srv.URL(), "--json")
	rep = inspect.StatusReport{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.LeftShards) != 0 || len(rep.Queues) != 3*8 {
		t.Errorf("status --json with shard 4 drained: left shards %v, %d queues (%v); want none and the 3 shards' 24", rep.LeftShards, len(rep.Queues), err)
	}
}

func TestInspectFindsEachJob(t *testing.T) {
	b := newBacklog(t)
	cases := []struct {
		id   string
		code int
		want []string
	}{
		{"queued-1", 0, []string{"in the intake, not routed yet: wp:{0}:in entry ", "not read by any consumer yet"}},
		{"routing", 0, []string{"in the intake, not routed yet", "read by consumer worker-a (alive)"}},
		{"lane-2", 0, []string{"waiting in its lane: wp:{0}:lane:fcm entry ", "attempt 0, not read by any consumer yet"}},
		{"flying", 0, []string{"in flight: wp:{0}:lane:fcm entry ", "read by consumer worker-a (alive)", "1 deliveries"}},
		{"apple-1", 0, []string{"in flight: wp:{0}:lane:apple entry "}},
		{"retry", 0, []string{"waiting to retry: due " + b.due.UTC().Format(time.RFC3339), "as attempt 1 on fcm",
			"last attempt (0): PROVIDER_DOWN: 503 Service Unavailable"}},
		{"done", 0, []string{"ended: ACCEPTED (HTTP 201) on fcm at attempt 0", "sent mark set"}},
		{"bad-2", 0, []string{"dead-lettered: INVALID_JOB", "reason: ttl: must be at least 0, got -5", "gateway-worker dead show "}},
		{"never", 1, []string{"not found: never enqueued under this prefix, or its records were trimmed"}},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			code, stdout, stderr := run(t, "inspect", "--redis", b.srv.URL(), tc.id)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
	// The JSON of a retry: snake_case, the last outcome, found.
	code, stdout, _ := run(t, "inspect", "--redis", b.srv.URL(), "--json", "retry")
	var rep struct {
		Found   bool   `json:"found"`
		HeldBy  string `json:"held_by"`
		Delayed struct {
			Attempt    int    `json:"attempt"`
			LastCode   string `json:"last_code"`
			LastDetail string `json:"last_detail"`
		} `json:"delayed"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || !rep.Found || rep.HeldBy != "fcm" ||
		rep.Delayed.LastCode != "PROVIDER_DOWN" || rep.Delayed.LastDetail != "503 Service Unavailable" || rep.Delayed.Attempt != 1 {
		t.Errorf("inspect --json retry: exit %d, %s (%v)", code, stdout, err)
	}
	// A scan cut short says so; the job is then not found within what was read.
	code, stdout, _ = run(t, "inspect", "--redis", b.srv.URL(), "--scan-limit", "1", "queued-2")
	if code != 1 || !strings.Contains(stdout, "scan cut: only 1 entries of wp:{0}:in, wp:{0}:dead were read") {
		t.Errorf("inspect --scan-limit 1 queued-2: exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := run(t, "inspect", "--redis", b.srv.URL()); code != 2 || !strings.Contains(stderr, "missing JOB_ID") {
		t.Errorf("inspect without a job id: exit %d, %q", code, stderr)
	}
}

// TestPauseShowsInStatusAndTheHeartbeat: a pause is in Redis where status and every worker's
// heartbeat see it, and resume clears it.
func TestPauseShowsInStatusAndTheHeartbeat(t *testing.T) {
	b := newBacklog(t)
	ctx := context.Background()
	code, stdout, stderr := run(t, "pause", "--redis", b.srv.URL(), "--reason", "incident 42", "apple")
	if code != 0 || !strings.Contains(stdout, "paused apple under prefix wp") || stderr != "" {
		t.Fatalf("pause: exit %d, %q, %q", code, stdout, stderr)
	}
	beat, err := b.st.Heartbeat(ctx, time.Now(), 5*time.Second, "{}")
	if err != nil || !cmp.Equal(beat.Paused, []string{"apple"}) {
		t.Fatalf("a worker's heartbeat after the pause: %+v, %v; want apple paused", beat, err)
	}
	_, stdout, _ = run(t, "status", "--redis", b.srv.URL(), "--json")
	var rep inspect.StatusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Paused) != 1 || rep.Paused[0].Provider != "apple" ||
		rep.Paused[0].Reason != "incident 42" || rep.Paused[0].By == "" || time.Since(rep.Paused[0].At) > time.Minute {
		t.Fatalf("status after the pause: %+v (%v)", rep.Paused, err)
	}
	_, stdout, _ = run(t, "status", "--redis", b.srv.URL())
	if !regexp.MustCompile(`(?m)^apple +\S+ \(\S+ ago\) +\S+ +incident 42$`).MatchString(stdout) {
		t.Errorf("status does not list the pause:\n%s", stdout)
	}
	// A provider no registry lists and no lane holds (a typo): refused, the valid ones listed,
	// nothing paused.
	code, _, stderr = run(t, "pause", "--redis", b.srv.URL(), "apples")
	if code != 2 || !strings.Contains(stderr, `"apples" is not a provider of registry.yaml (built in) and no lane of it exists`) ||
		!strings.Contains(stderr, "the providers are fcm, autopush, apple, wns, fallback") {
		t.Errorf("pause of an unknown provider: exit %d, %q; want 2 and the providers listed", code, stderr)
	}
	if code, stdout, _ := run(t, "resume", "--redis", b.srv.URL(), "apples"); code != 0 || !strings.Contains(stdout, "apples was not paused") {
		t.Errorf("resume apples after the refused pause: exit %d, %q; want it not paused", code, stdout)
	}
	// A provider the registry does not list but a lane of which exists (a fleet with another
	// table) is paused.
	if err := b.srv.Client(t).XAdd(ctx, &redis.XAddArgs{Stream: b.st.Keys(0).Lane("selfhosted"), Values: []any{"job", "x"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "pause", "--redis", b.srv.URL(), "selfhosted"); code != 0 {
		t.Errorf("pause of a provider with a lane: exit %d, %q; want 0", code, stderr)
	}
	for _, p := range []string{"apple", "selfhosted"} {
		if code, stdout, _ := run(t, "resume", "--redis", b.srv.URL(), p); code != 0 || !strings.Contains(stdout, "resumed "+p) {
			t.Errorf("resume %s: exit %d, %q", p, code, stdout)
		}
	}
	if beat, err := b.st.Heartbeat(ctx, time.Now(), 5*time.Second, "{}"); err != nil || len(beat.Paused) != 0 {
		t.Errorf("a worker's heartbeat after resume: %+v, %v; want nothing paused", beat, err)
	}
	if code, stdout, _ := run(t, "resume", "--redis", b.srv.URL(), "apple"); code != 0 || !strings.Contains(stdout, "apple was not paused") {
		t.Errorf("a second resume: exit %d, %q", code, stdout)
	}
	_, stdout, _ = run(t, "status", "--redis", b.srv.URL())
	if !strings.Contains(stdout, "paused providers: none") {
		t.Errorf("status after resume:\n%s", stdout)
	}
	for _, args := range [][]string{{"pause", "--redis", b.srv.URL(), ""}, {"pause", "--redis", b.srv.URL(), " "}, {"resume", "--redis", b.srv.URL(), "a b"}} {
		if code, _, stderr := run(t, args...); code != 2 || !strings.Contains(stderr, "PROVIDER") {
			t.Errorf("%q: exit %d, %q; want 2 naming PROVIDER", args, code, stderr)
		}
	}
	// A reason status could not print as one line is refused, and nothing is paused.
	for _, reason := range []string{"line one\nfake: row", "bell\a", "\x1b[31mred", "next\u0085line", "\u202eesrever", "csi\x9b31m",
		strings.Repeat("x", maxPauseReason+1)} {
		if code, _, stderr := run(t, "pause", "--redis", b.srv.URL(), "--reason", reason, "apple"); code != 2 || !strings.Contains(stderr, "--reason") {
			t.Errorf("pause --reason %q: exit %d, %q; want 2 naming --reason", reason, code, stderr)
		}
	}
	if ps, err := b.insp.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("paused after refused reasons: %v, %v; want none", ps, err)
	}
	// A pause written by something else with a newline in its reason prints quoted on its row.
	if err := b.insp.PauseProvider(context.Background(), inspect.Pause{Provider: "wns", Reason: "a\nb", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, stdout, _ = run(t, "status", "--redis", b.srv.URL()); !strings.Contains(stdout, `"a\nb"`) {
		t.Errorf("status with a reason holding a newline; want it quoted:\n%s", stdout)
	}
}

// TestReadersReportAnUnreachableRedis: the commands that read Redis exit 3 when it cannot be
// read, not 1 (which is an answer).
func TestReadersReportAnUnreachableRedis(t *testing.T) {
	t.Parallel() // it mostly waits for dials that fail
	ids := t.TempDir() + "/ids.txt"
	if err := os.WriteFile(ids, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const nowhere = "redis://127.0.0.1:1/0?dial_timeout=200ms&max_retries=-1"
	for _, args := range [][]string{
		{"status"}, {"inspect", "job-1"}, {"dead", "ls"}, {"dead", "show", "1-0"}, {"dead", "replay", "--all"},
		{"dead", "purge", "--all", "--yes"}, {"pause", "fcm"}, {"resume", "fcm"}, {"audit", "--ids", ids},
	} {
		code, _, stderr := run(t, append(args, "--redis", nowhere)...)
		if code != 3 || !strings.Contains(stderr, "could not read or write Redis") {
			t.Errorf("%v: exit %d, %q; want 3 and that Redis could not be read", args, code, stderr)
		}
	}
}
