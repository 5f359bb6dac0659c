package stream

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestReadIntakeRefusesBadEntriesInRedis: entries that break the entry rules are dead-lettered
// by the read itself, so none of them reaches the worker; the good ones around them are read.
// A refused entry's dead record carries at most MaxInvalidJobBytes of it, with its size and a
// note; one at most that large is kept whole.
func TestReadIntakeRefusesBadEntriesInRedis(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	big := `{"id":"big-1","payload":"` + strings.Repeat("x", 8<<20) + `"}`
	add := func(values ...any) string {
		t.Helper()
		id, err := env.c.XAdd(env.ctx, &redis.XAddArgs{Stream: k.Intake, Values: values}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	good1 := add("job", validJob("good-1"))
	add("job", big)
	add("job", `{"id":"two-1"}`, "job", validJob("two-1"))
	add("payload", "x")
	add("job", validJob("extra-1"), "source", "billing")
	good2 := add("job", validJob("good-2"))

	entries, refused, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, e := range entries {
		gotIDs = append(gotIDs, e.ID)
		if len(e.Fields["job"]) > job.MaxEntryBytes {
			t.Errorf("entry %s reached the worker with %d bytes", e.ID, len(e.Fields["job"]))
		}
	}
	if d := cmp.Diff([]string{good1, good2}, gotIDs); d != "" {
		t.Errorf("entries read (-want +got):\n%s", d)
	}
	wantRefused := []Refusal{
		{"big-1", fmt.Sprintf("entry is %d bytes; at most %d", len(big), job.MaxEntryBytes)},
		{"two-1", `entry has 2 "job" fields; exactly one is allowed`},
		{"", `entry has no "job" field`},
		{"extra-1", `entry has a field "source" besides "job"; only "job" is allowed`},
	}
	if d := cmp.Diff(wantRefused, refused); d != "" {
		t.Errorf("refused (-want +got):\n%s", d)
	}
	dead := env.entries(t, k.Dead)
	if len(dead) != 4 {
		t.Fatalf("%d dead records, want 4", len(dead))
	}
	first := fieldsOf(dead[0])
	if first["job"] != big[:MaxInvalidJobBytes] || first["note"] != fmt.Sprintf("job cut to its first %d of %d bytes", MaxInvalidJobBytes, len(big)) ||
		first["job_bytes"] != itoa(int64(len(big))) || first["code"] != "INVALID_JOB" || first["id"] != "big-1" || first["from"] != k.Intake {
		t.Errorf("dead record of the big entry: id %q code %q from %q note %q job_bytes %q, job of %d bytes",
			first["id"], first["code"], first["from"], first["note"], first["job_bytes"], len(first["job"]))
	}
	if last := fieldsOf(dead[3]); last["job"] != validJob("extra-1") || last["note"] != "" || last["job_bytes"] != "" {
		t.Errorf("dead record of a small entry with an extra field: %v; want its job whole, no note", last)
	}
	// Only the two good entries are left, pending for w1.
	if n, p := env.xlen(t, k.Intake), env.pending(t, k.Intake); n != 2 || p != 2 {
		t.Errorf("intake holds %d entries, %d pending; want the 2 good ones, pending", n, p)
	}
}

// TestReadIntakeWaitsForNewEntries: a drained intake waits up to block for an entry and then
// reads it, including one added between the read and the wait.
func TestReadIntakeWaitsForNewEntries(t *testing.T) {
	env, s := newStore(t, "fcm")
	done := make(chan []Entry, 1)
	go func() {
		got, _, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	// The reader may or may not be waiting yet; either way the entry must be read.
	env.enqueue(t, s, validJob("late"))
	select {
	case got := <-done:
		if len(got) != 1 || jobID(got[0].Fields["job"]) != "late" {
			t.Fatalf("ReadIntake = %v; want the late entry", got)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("ReadIntake did not return the entry that arrived while it waited")
	}
	start := time.Now()
	if got, _, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 200*time.Millisecond); err != nil || len(got) != 0 {
		t.Fatalf("ReadIntake on a drained stream = %v, %v", got, err)
	}
	if time.Since(start) < 150*time.Millisecond {
		t.Errorf("ReadIntake returned after %s; it must wait for the block time", time.Since(start))
	}
}

// TestToLaneAcksCopies: a copy of a job the gateway holds (in a lane, in flight, waiting to
// retry) or accepted within the sent-mark window is acknowledged with no record; once the job
// has ended any other way, the id may be enqueued again (a replay).
func TestToLaneAcksCopies(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	move := func(id string) LaneVerdict {
		t.Helper()
		env.enqueue(t, s, validJob(id))
		in := env.readIntake(t, s, 1)[0]
		v, err := s.ToLane(env.ctx, in, "fcm", job.ClassTransactional, id, in.Fields["job"], ms(t0))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := move("a"); v != Moved {
		t.Fatalf("first copy: %v, want Moved", v)
	}
	if v := move("a"); v != Copy {
		t.Fatalf("copy while the first is in its lane: %v, want Copy", v)
	}
	e := env.readLane(t, s, "fcm", 1)[0]
	if v := move("a"); v != Copy {
		t.Fatalf("copy while the first is in flight: %v, want Copy", v)
	}
	if v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: "a", Provider: "fcm", Due: t0.Add(time.Hour), Attempt: 1, Job: e.Fields["job"]}); v != Queued || err != nil {
		t.Fatalf("ToDelayed = %v, %v", v, err)
	}
	if v := move("a"); v != Copy {
		t.Fatalf("copy while the first waits to retry: %v, want Copy", v)
	}
	if n := env.xlen(t, k.Lane("fcm")) + env.xlen(t, k.Intake); n != 0 {
		t.Errorf("copies left %d entries behind", n)
	}
	// Accepted: later copies are swallowed for the sent-mark window.
	if v := move("b"); v != Moved {
		t.Fatal(v)
	}
	eb := env.readLane(t, s, "fcm", 1)[0]
	mustOK(t)(s.Finish(env.ctx, eb, Result{ID: "b", Provider: "fcm", Code: "ACCEPTED", Sent: true, At: t0}))
	if v := move("b"); v != Copy {
		t.Fatalf("copy of an accepted job: %v, want Copy", v)
	}
	// Ended otherwise (GONE): the id is free again.
	if v := move("c"); v != Moved {
		t.Fatal(v)
	}
	ec := env.readLane(t, s, "fcm", 1)[0]
	mustOK(t)(s.Finish(env.ctx, ec, Result{ID: "c", Provider: "fcm", Code: "INVALID_REQUEST", At: t0}))
	if v := move("c"); v != Moved {
		t.Fatalf("the id of a job that ended unsent, enqueued again: %v, want Moved", v)
	}
	if n := len(env.entries(t, k.Results)) + len(env.entries(t, k.Dead)); n != 2 {
		t.Errorf("%d records; want 2 (b accepted, c refused): copies must write none", n)
	}
	held, err := env.c.HKeys(env.ctx, k.Jobs).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "c"}, slices.Sorted(slices.Values(held))); d != "" {
		t.Errorf("jobs index (-want +got):\n%s", d)
	}
}

// TestOutcomesAreRecordedWhenRedisIsOutOfMemory: with used memory over maxmemory and nothing to
// evict, every script that records an outcome still runs (an answered push must be recorded),
// the heartbeat still runs (a live replica must not look dead), and the moves that take new
// work are refused whole, with an error WriteRefused recognises, changing nothing.
func TestOutcomesAreRecordedWhenRedisIsOutOfMemory(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	lanes := make([]Entry, 5)
	for i := range lanes {
		lanes[i] = env.laneEntry(t, s, "fcm", fmt.Sprintf("j%d", i))
	}
	env.enqueue(t, s, validJob("new-1"))
	in := env.readIntake(t, s, 1)[0]
	env.enqueue(t, s, validJob("new-2"))
	if err := env.c.ConfigSet(env.ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := env.c.ConfigSet(env.ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.c.ConfigSet(env.ctx, "maxmemory", "0") })

	if err := s.ProbeWrite(env.ctx, 0); !WriteRefused(err) {
		t.Fatalf("ProbeWrite under OOM = %v; want a write refusal", err)
	}
	v, err := s.ToLane(env.ctx, in, "fcm", job.ClassTransactional, "new-1", in.Fields["job"], ms(t0))
	if !WriteRefused(err) || v != LaneNotOwner {
		t.Fatalf("ToLane under OOM = %v, %v; want a write refusal", v, err)
	}
	if n, p := env.xlen(t, k.Intake), env.pending(t, k.Intake); n != 2 || p != 1 {
		t.Errorf("after the refused move the intake holds %d entries, %d pending; want 2, 1 (nothing changed)", n, p)
	}
	if _, err := s.PromoteDue(env.ctx, 0, t0, 10); err != nil {
		t.Errorf("PromoteDue with nothing due under OOM: %v", err)
	}

	mustOK(t)(s.Finish(env.ctx, lanes[0], Result{ID: "j0", Provider: "fcm", Code: "ACCEPTED", Sent: true, At: t0}))
	mustOK(t)(s.Finish(env.ctx, lanes[1], Result{ID: "j1", Provider: "fcm", Code: "GONE", Gone: true, MarkGone: true, Endpoint: testEndpoint, At: t0}))
	if v, err := s.ToDelayed(env.ctx, lanes[2], RetryRecord{ID: "j2", Provider: "fcm", Due: t0, Attempt: 1, Job: lanes[2].Fields["job"]}); v != Queued || err != nil {
		t.Errorf("ToDelayed under OOM = %v, %v", v, err)
	}
	mustOK(t)(s.ToDead(env.ctx, lanes[3], DeadRecord{ID: "j3", Code: "PROVIDER_DOWN", Reason: "gave up", At: t0}))
	mustOK(t)(s.AckSent(env.ctx, lanes[4], "j4"))
	if beat, err := s.Heartbeat(env.ctx, t0, time.Minute, `{"v":1}`); err != nil || len(beat.Live) != 1 {
		t.Errorf("Heartbeat under OOM = %v, %v", beat, err)
	}
	if n := len(env.entries(t, k.Results)); n != 2 {
		t.Errorf("%d ledger records under OOM, want 2", n)
	}
	if n := len(env.entries(t, k.Gone)); n != 1 {
		t.Errorf("%d gone records under OOM, want 1", n)
	}

	if err := env.c.ConfigSet(env.ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.ProbeWrite(env.ctx, 0); err != nil {
		t.Fatalf("ProbeWrite with memory back = %v", err)
	}
	if v, err := s.ToLane(env.ctx, in, "fcm", job.ClassTransactional, "new-1", in.Fields["job"], ms(t0)); v != Moved || err != nil {
		t.Fatalf("ToLane with memory back = %v, %v", v, err)
	}
	if n := env.c.Exists(env.ctx, k.Probe).Val(); n != 0 {
		t.Error("the write probe created its key")
	}
}

// TestShardCountIsRecordedAndEnforced: the first user of a prefix records its shard count; a
// store or a producer with another count is refused with both counts named (an audit too:
// stream/inspect's TestAuditRefusesAnotherShardCount).
func TestShardCountIsRecordedAndEnforced(t *testing.T) {
	env := newEnv(t)
	env.store(t, "w1", Options{Shards: 4}, "fcm")
	if got := env.c.Get(env.ctx, ShardsKey("")).Val(); got != "4" {
		t.Fatalf("recorded shard count = %q, want 4", got)
	}
	want := `stream: shard count mismatch: prefix "wp" is used with 4 shards (recorded in wp:shards) but this process was given 1; use --shards 4`
	s1 := New(env.c, env.c, Options{Consumer: "w2", Shards: 1})
	if err := s1.Setup(env.ctx, []string{"fcm"}); err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, ErrShardCount) {
		t.Errorf("Setup with 1 shard = %v; want %q... (ErrShardCount)", err, want)
	}
	if _, err := NewProducer(env.c, "", 1).Enqueue(env.ctx, []byte(validJob("x"))); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Enqueue with 1 shard = %v; want %q...", err, want)
	}
	if n := env.xlen(t, KeysFor("", 0).Intake); n != 0 {
		t.Errorf("a refused producer wrote %d entries", n)
	}
	if _, err := NewProducer(env.c, "", 4).Enqueue(env.ctx, []byte(validJob("x"))); err != nil {
		t.Errorf("Enqueue with the recorded count: %v", err)
	}
}

func TestPrefixWithABraceIsRefused(t *testing.T) {
	env := newEnv(t)
	s := New(env.c, env.c, Options{Consumer: "w1", Prefix: "app{1}"})
	if err := s.Setup(env.ctx, []string{"fcm"}); !errors.Is(err, ErrBadPrefix) {
		t.Errorf("Setup with prefix app{1} = %v; want ErrBadPrefix", err)
	}
	if _, err := NewProducer(env.c, "a}b", 1).Enqueue(env.ctx, []byte(validJob("x"))); !errors.Is(err, ErrBadPrefix) {
		t.Errorf("Enqueue with prefix a}b = %v; want ErrBadPrefix", err)
	}
	if keys, _ := env.c.Keys(env.ctx, "*").Result(); len(keys) != 0 {
		t.Errorf("a refused prefix wrote keys: %v", keys)
	}
}

func TestErrorClasses(t *testing.T) {
	cases := []struct {
		msg              string
		refused, writeNo bool
	}{
		{"WRONGPASS invalid username-password pair or user is disabled.", true, false},
		{"NOAUTH Authentication required.", true, false},
		{"NOPERM this user has no permissions to run the 'evalsha' command", true, false},
		{"OOM command not allowed when used memory > 'maxmemory'. script: 1f, on @user_script:24.", false, true},
		{"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.", false, true},
		{"READONLY You can't write against a read only replica.", false, true},
		{"NOREPLICAS Not enough good replicas to write.", false, true},
		{"dial tcp 127.0.0.1:1: connect: connection refused", false, false},
		{"OOMPH not a code", false, false},
	}
	for _, c := range cases {
		err := fmt.Errorf("stream: finish: %w", errors.New(c.msg))
		if got := Refused(err); got != c.refused {
			t.Errorf("Refused(%q) = %v", c.msg, got)
		}
		if got := WriteRefused(err); got != c.writeNo {
			t.Errorf("WriteRefused(%q) = %v", c.msg, got)
		}
	}
	if Refused(nil) || WriteRefused(nil) || Unreachable(nil) {
		t.Error("nil is none")
	}
	for _, c := range cases[:7] { // Redis's answers, however they reach the caller
		if Unreachable(fmt.Errorf("x: %w", errors.New(c.msg))) {
			t.Errorf("Unreachable(%q) = true; Redis answered", c.msg)
		}
	}
}

func TestInfoField(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	if got := infoField(info, "redis_version"); got != "7.0.15" {
		t.Errorf("infoField = %q", got)
	}
	if got := infoField(info, "missing"); got != "" {
		t.Errorf("infoField(missing) = %q", got)
	}
}
