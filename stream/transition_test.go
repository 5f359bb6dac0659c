package stream

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/webpush-gateway/webpush-gateway/job"
)

// laneEntry puts job id through intake into provider's lane and returns the lane entry, read
// (and so owned) by s.
func (e *env) laneEntry(t *testing.T, s *Store, provider, id string) Entry {
	t.Helper()
	e.enqueue(t, s, validJob(id))
	in := e.readIntake(t, s, 1)[0]
	ok, err := s.moveToLane(e.ctx, in, provider, in.Fields["job"], ms(t0))
	if err != nil || !ok {
		t.Fatalf("ToLane = %v, %v", ok, err)
	}
	return e.readLane(t, s, provider, 1)[0]
}

// TestTransitionsRefuseNonOwner: a consumer that does not own an entry (another consumer
// read it, or it was already finished) cannot move it, and nothing at all is written.
func TestTransitionsRefuseNonOwner(t *testing.T) {
	type call func(s *Store, e Entry) (bool, error)
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	calls := []struct {
		name   string
		intake bool // the entry is an intake entry (else a lane entry)
		do     call
	}{
		{"ToLane", true, func(s *Store, e Entry) (bool, error) {
			return s.moveToLane(env.ctx, e, "fcm", e.Fields["job"], 1)
		}},
		{"ToDead from intake", true, func(s *Store, e Entry) (bool, error) {
			return s.ToDead(env.ctx, e, DeadRecord{ID: "x", Code: "INVALID_JOB", Reason: "r", Job: "j", At: t0})
		}},
		{"ToDead from lane", false, func(s *Store, e Entry) (bool, error) {
			return s.ToDead(env.ctx, e, DeadRecord{ID: "x", Code: "PROVIDER_DOWN", Reason: "r", Job: "j", At: t0})
		}},
		{"Finish gone", false, func(s *Store, e Entry) (bool, error) {
			return s.Finish(env.ctx, e, Result{ID: "x", Code: "GONE", At: t0, Gone: true, MarkGone: true, Endpoint: testEndpoint})
		}},
		{"AckSent", false, func(s *Store, e Entry) (bool, error) {
			return s.AckSent(env.ctx, e, jobID(e.Fields["job"]))
		}},
		{"ToDelayed", false, func(s *Store, e Entry) (bool, error) {
			v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: "x", Provider: "fcm", Recipient: "r", Due: t0, Attempt: 1, Job: "j"})
			if v != NotOwner && v != Queued {
				t.Errorf("ToDelayed verdict %v", v)
			}
			return v == Queued, err
		}},
	}
	for i, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			id := "own-" + string(rune('a'+i))
			var e Entry
			if c.intake {
				env.enqueue(t, w1, validJob(id))
				e = env.readIntake(t, w1, 1)[0]
			} else {
				e = env.laneEntry(t, w1, "fcm", id)
			}
			before := env.snapshot(t)
			ok, err := c.do(w2, e)
			if err != nil || ok {
				t.Fatalf("another consumer: got %v, %v; want false, nil", ok, err)
			}
			if d := cmp.Diff(before, env.snapshot(t)); d != "" {
				t.Fatalf("a refused call changed Redis (-before +after):\n%s", d)
			}
			// The owner can; after that the entry is no longer pending and even the owner
			// cannot act on it a second time.
			if ok, err := c.do(w1, e); err != nil || !ok {
				t.Fatalf("owner: got %v, %v; want true, nil", ok, err)
			}
			after := env.snapshot(t)
			if ok, err := c.do(w1, e); err != nil || ok {
				t.Fatalf("owner again: got %v, %v; want false, nil", ok, err)
			}
			if d := cmp.Diff(after, env.snapshot(t)); d != "" {
				t.Fatalf("a second call changed Redis (-before +after):\n%s", d)
			}
			// Leave nothing behind for the next case.
			if err := env.c.FlushDB(env.ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := w1.Setup(env.ctx, []string{"fcm"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFinishAcceptedAfterReclaim: a send accepted after its entry was handed back and read by
// another consumer is still recorded (the push is out), with its sent mark, and the entry is
// left to its new owner; the new owner's Finish then only acks, so the job has one ledger
// record.
func TestFinishAcceptedAfterReclaim(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	e := env.laneEntry(t, w1, "fcm", "j1")
	lane := w1.Keys(0).Lane("fcm")
	env.age(t, lane, "w1", e.ID, 10*time.Minute, 1)
	claimed := env.takeOver(t, w2, lane, time.Minute, 5, "w2")
	if len(claimed) != 1 {
		t.Fatalf("w2 took over %d entries, want 1", len(claimed))
	}
	// w1's send, started before the reclaim, comes back accepted.
	if ok, err := w1.Finish(env.ctx, e, Result{ID: "j1", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); !ok || err != nil {
		t.Fatalf("w1 Finish after reclaim = %v, %v; want recorded", ok, err)
	}
	if sent, err := w2.WasSent(env.ctx, 0, "j1"); !sent || err != nil {
		t.Fatalf("WasSent = %v, %v; want the mark set", sent, err)
	}
	if n := env.pending(t, lane); n != 1 {
		t.Fatalf("pending = %d, want 1: the entry stays w2's to ack", n)
	}
	// A second accepted record from the stale owner is refused.
	if ok, _ := w1.Finish(env.ctx, e, Result{ID: "j1", Code: "ACCEPTED", Sent: true, At: t0}); ok {
		t.Fatal("a second stale Finish recorded again")
	}
	// w2 finishes with any outcome: only the ack happens.
	if ok, err := w2.Finish(env.ctx, claimed[0], Result{ID: "j1", Provider: "fcm", Code: "GONE", Status: 410, At: t0}); !ok || err != nil {
		t.Fatalf("w2 Finish = %v, %v", ok, err)
	}
	if n := env.xlen(t, w1.Keys(0).Results); n != 1 {
		t.Fatalf("ledger holds %d records for j1, want 1", n)
	}
	if n := env.xlen(t, lane); n != 0 {
		t.Fatalf("lane XLEN = %d, want 0", n)
	}
	// Exhausted retries of a job already recorded as accepted: acked, no dead record.
	e2 := env.laneEntry(t, w1, "fcm", "j2")
	windowAdd(t, env, w1.Keys(0).Window, redisMs(t, env), DefaultSentTTL, "j2")
	if ok, err := w1.ToDead(env.ctx, e2, DeadRecord{ID: "j2", Code: "PROVIDER_DOWN", Reason: "gave up", At: t0}); !ok || err != nil {
		t.Fatalf("ToDead = %v, %v", ok, err)
	}
	if n := env.xlen(t, w1.Keys(0).Dead); n != 0 {
		t.Fatalf("dead stream holds %d records for an accepted job, want 0", n)
	}
}

func TestToLaneWritesLaneEntry(t *testing.T) {
	env, s := newStore(t, "fcm", "apple")
	job := validJob("j1")
	env.enqueue(t, s, job)
	in := env.readIntake(t, s, 1)[0]
	if ok, err := s.moveToLane(env.ctx, in, "apple", job, 1748779200000); err != nil || !ok {
		t.Fatalf("ToLane = %v, %v", ok, err)
	}
	if n := env.xlen(t, s.Keys(0).Intake); n != 0 {
		t.Errorf("intake XLEN = %d, want 0 (acked entries are deleted)", n)
	}
	if n := env.pending(t, s.Keys(0).Intake); n != 0 {
		t.Errorf("intake pending = %d, want 0", n)
	}
	if n := env.xlen(t, s.Keys(0).Lane("fcm")); n != 0 {
		t.Errorf("lane fcm XLEN = %d, want 0", n)
	}
	lane := env.entries(t, s.Keys(0).Lane("apple"))
	if len(lane) != 1 {
		t.Fatalf("lane apple has %d entries, want 1", len(lane))
	}
	want := map[string]string{"job": job, "provider": "apple", "attempt": "0", "enqueued_at": "1748779200000"}
	if d := cmp.Diff(want, fieldsOf(lane[0])); d != "" {
		t.Errorf("lane entry (-want +got):\n%s", d)
	}
	// The lane consumer sees it.
	got := env.readLane(t, s, "apple", 1)[0]
	if d := cmp.Diff(want, got.Fields); d != "" {
		t.Errorf("ReadLane fields (-want +got):\n%s", d)
	}
	if got.Stream != s.Keys(0).Lane("apple") || got.Shard != 0 {
		t.Errorf("ReadLane entry = %+v", got)
	}
}

func TestToLaneCreatesGroupOfUnknownLane(t *testing.T) {
	env, s := newStore(t) // no providers at Setup
	env.enqueue(t, s, validJob("j1"))
	in := env.readIntake(t, s, 1)[0]
	if ok, err := s.moveToLane(env.ctx, in, "newprov", in.Fields["job"], 1); err != nil || !ok {
		t.Fatalf("ToLane = %v, %v", ok, err)
	}
	// The entry is readable by the group, not stranded in a stream without one.
	env.readLane(t, s, "newprov", 1)
}

func TestToDeadRecord(t *testing.T) {
	env, s := newStore(t, "fcm")
	big := strings.Repeat("x", 10<<20)
	invalid64 := `{"id":"` + strings.Repeat("i", 65536-9) + `"}`
	valid6k := `{"id":"key-1","payload":"` + strings.Repeat("p", 6000) + `"}`
	cases := []struct {
		name string
		job  string
		rec  DeadRecord
		want map[string]string
	}{
		{"invalid job from intake", "{bad", DeadRecord{Code: "INVALID_JOB", Reason: "job: not valid JSON", Job: "{bad", At: t0},
			map[string]string{"id": "", "code": "INVALID_JOB", "reason": "job: not valid JSON", "provider": "", "attempt": "0", "at": "1748779200000", "job": "{bad"}},
		// No job the gateway took is that large; a record is cut to the entry limit all the same.
		{"a 10 MB job is cut with a note", "{}", DeadRecord{Code: "INVALID_JOB", Reason: "entry is 10485760 bytes; at most 65536", Job: big, At: t0},
			map[string]string{"id": "", "code": "INVALID_JOB", "reason": "entry is 10485760 bytes; at most 65536", "provider": "", "attempt": "0", "at": "1748779200000",
				"job": big[:65536], "note": "job cut to its first 65536 of 10485760 bytes", "job_bytes": "10485760"}},
		// An invalid job keeps its first bytes only, and an id that long is not kept at all.
		{"an invalid 64 KiB job is cut to its first bytes", "{}", DeadRecord{ID: invalid64[7 : 65536-2], Code: "INVALID_JOB", Reason: `unknown field "colour"`, Job: invalid64, JobInvalid: true, At: t0},
			map[string]string{"id": "", "code": "INVALID_JOB", "reason": `unknown field "colour"`, "provider": "", "attempt": "0", "at": "1748779200000",
				"job": invalid64[:4096], "note": "job cut to its first 4096 of 65536 bytes", "job_bytes": "65536"}},
		// A valid job refused for the configuration is kept whole, to be replayed.
		{"a valid job is kept whole", "{}", DeadRecord{ID: "key-1", Code: "INVALID_JOB", Reason: `vapid_key: no key named "x" is configured`, Job: valid6k, At: t0},
			map[string]string{"id": "key-1", "code": "INVALID_JOB", "reason": `vapid_key: no key named "x" is configured`, "provider": "", "attempt": "0", "at": "1748779200000",
				"job": valid6k}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env.enqueue(t, s, c.job)
			in := env.readIntake(t, s, 1)[0]
			if ok, err := s.ToDead(env.ctx, in, c.rec); err != nil || !ok {
				t.Fatalf("ToDead = %v, %v", ok, err)
			}
			dead := env.entries(t, s.Keys(0).Dead)
			got := fieldsOf(dead[len(dead)-1])
			c.want["from"] = s.Keys(0).Intake
			c.want["entry"] = in.ID
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("dead record (-want +got):\n%s", d)
			}
			if n := env.xlen(t, s.Keys(0).Intake); n != 0 {
				t.Errorf("intake XLEN = %d, want 0", n)
			}
		})
	}
}

// TestFinishWrites: what each kind of terminal outcome writes besides the ledger record. Only
// GONE marks the endpoint gone; KEY_MISMATCH tells the upstream through the gone stream but
// leaves the endpoint unmarked, so a retry signed with the right key is still sent.
func TestFinishWrites(t *testing.T) {
	cases := []struct {
		name      string
		r         Result
		wantMark  bool              // the endpoint's gone mark
		wantSent  bool              // the job's sent mark
		wantGoneF map[string]string // the gone stream record; nil for none
	}{
		{"terminal", Result{Code: "INVALID_REQUEST", Status: 400, Detail: "bad", Attempt: 2}, false, false, nil},
		{"sent", Result{Code: "ACCEPTED", Status: 201, Sent: true}, false, true, nil},
		{"gone", Result{Code: "GONE", Status: 410, Detail: "unsubscribed", Gone: true, MarkGone: true, Endpoint: testEndpoint}, true, false,
			map[string]string{"code": "GONE", "endpoint": testEndpoint, "detail": "unsubscribed", "provider": "fcm", "at": "1748779200000"}},
		{"key mismatch", Result{Code: "KEY_MISMATCH", Status: 403, Detail: "key mismatch", Gone: true, Endpoint: testEndpoint}, false, false,
			map[string]string{"code": "KEY_MISMATCH", "endpoint": testEndpoint, "detail": "key mismatch", "provider": "fcm", "at": "1748779200000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t)
			s := env.store(t, "w1", Options{SentTTL: time.Hour, GoneTTL: 2 * time.Hour, Now: func() time.Time { return t0 }}, "fcm")
			e := env.laneEntry(t, s, "fcm", "j1")
			r := c.r
			r.ID, r.Provider, r.Latency, r.At = "j1", "fcm", 42*time.Millisecond, t0
			if ok, err := s.Finish(env.ctx, e, r); err != nil || !ok {
				t.Fatalf("Finish = %v, %v", ok, err)
			}
			k := s.Keys(0)
			res := env.entries(t, k.Results)
			if len(res) != 1 {
				t.Fatalf("ledger has %d entries, want 1", len(res))
			}
			want := map[string]string{"id": "j1", "provider": "fcm", "code": r.Code, "status": itoa(int64(r.Status)),
				"detail": r.Detail, "attempt": itoa(int64(r.Attempt)), "latency_ms": "42", "at": "1748779200000"}
			if d := cmp.Diff(want, fieldsOf(res[0])); d != "" {
				t.Errorf("ledger (-want +got):\n%s", d)
			}
			if n := env.xlen(t, e.Stream); n != 0 {
				t.Errorf("lane XLEN = %d, want 0", n)
			}
			if n := env.pending(t, e.Stream); n != 0 {
				t.Errorf("lane pending = %d, want 0", n)
			}
			sent, _ := s.WasSent(env.ctx, 0, "j1")
			if sent != c.wantSent {
				t.Errorf("WasSent = %v, want %v", sent, c.wantSent)
			}
			if c.wantSent {
				// The job went in at Redis's time, not at the Store's clock (t0, long past), so
				// the window keeps it for the TTL from now (TestWindowAgesByRedisClock).
				if !windowSeen(t, env, s.Keys(0).Window, redisMs(t, env)+DefaultSentTTL.Milliseconds()-1000, DefaultSentTTL, "j1")[0] {
					t.Error("the window does not hold the job a TTL less a second from now")
				}
			}
			marked, _ := s.IsGone(env.ctx, 0, testEndpoint)
			if marked != c.wantMark {
				t.Errorf("IsGone = %v, want %v", marked, c.wantMark)
			}
			if c.wantMark {
				if ttl := env.c.PTTL(env.ctx, k.GoneMark(testEndpoint)).Val(); ttl <= 119*time.Minute || ttl > 2*time.Hour {
					t.Errorf("gone mark TTL = %v, want about 2h", ttl)
				}
			}
			goneEntries := env.entries(t, k.Gone)
			if c.wantGoneF == nil {
				if len(goneEntries) != 0 {
					t.Errorf("gone stream has %d entries, want 0", len(goneEntries))
				}
				return
			}
			if len(goneEntries) != 1 {
				t.Fatalf("gone stream has %d entries, want 1", len(goneEntries))
			}
			c.wantGoneF["id"] = "j1"
			if d := cmp.Diff(c.wantGoneF, fieldsOf(goneEntries[0])); d != "" {
				t.Errorf("gone record (-want +got):\n%s", d)
			}
		})
	}
}

func TestAckSentWritesNothing(t *testing.T) {
	env, s := newStore(t, "fcm")
	e := env.laneEntry(t, s, "fcm", "j1")
	before := env.snapshot(t)
	if ok, err := s.AckSent(env.ctx, e, jobID(e.Fields["job"])); err != nil || !ok {
		t.Fatalf("AckSent = %v, %v", ok, err)
	}
	after := env.snapshot(t)
	want := before
	want[e.Stream] = "stream len=0 pending=0"
	delete(want, s.Keys(0).Jobs) // the job is no longer held: its index entry goes
	if d := cmp.Diff(want, after); d != "" {
		t.Errorf("AckSent changed more than the lane (-want +got):\n%s", d)
	}
}

func TestReadNoEntriesAndRecreatedGroup(t *testing.T) {
	env, s := newStore(t, "fcm")
	got, _, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 10*time.Millisecond)
	if err != nil || got != nil {
		t.Fatalf("ReadIntake on empty = %v, %v; want nil, nil", got, err)
	}
	// A flushed Redis: the read recreates the group instead of failing forever.
	if err := env.c.FlushDB(env.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	env.enqueue(t, s, validJob("after-flush"))
	got, _, err = s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("ReadIntake after flush = %d entries, %v; want 1", len(got), err)
	}
}

// TestSetupGroupStartsAtZero: jobs an upstream enqueued before the first worker ever ran are
// delivered.
func TestSetupGroupStartsAtZero(t *testing.T) {
	env := newEnv(t)
	k := KeysFor("", 0)
	for _, id := range []string{"early-1", "early-2"} {
		if err := env.c.XAdd(env.ctx, redisXAdd(k.Intake, validJob(id))).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s := env.store(t, "w1", Options{}, "fcm")
	env.readIntake(t, s, 2)
	// A second Setup (another replica starting) leaves the group where it is.
	if err := s.Setup(env.ctx, []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ReadIntake(env.ctx, 0, job.ClassTransactional, 10, 0); len(got) != 0 {
		t.Errorf("after a second Setup, ReadIntake returned %d entries again", len(got))
	}
}
