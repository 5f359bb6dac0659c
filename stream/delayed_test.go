package stream

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/job"
)

func TestToDelayedCaps(t *testing.T) {
	cases := []struct {
		name        string
		maxDelayed  int64
		maxPer      int64
		recipient   string
		existing    []string // recipients of jobs already waiting
		wantVerdict RetryVerdict
		wantReason  string
	}{
		{"no caps", 0, 0, "alice", []string{"alice", "alice", "bob"}, Queued, ""},
		{"under both caps", 4, 3, "alice", []string{"alice", "bob"}, Queued, ""},
		{"global cap", 3, 0, "alice", []string{"bob", "carol", "dave"}, DeadGlobalCap, "delayed set is full for fcm (3 retries waiting); not retried"},
		{"global cap wins over recipient cap", 2, 1, "alice", []string{"alice", "bob"}, DeadGlobalCap, "delayed set is full for fcm (2 retries waiting); not retried"},
		{"recipient cap", 0, 2, "alice", []string{"alice", "alice", "bob"}, DeadRecipientCap, "recipient alice has 2 jobs waiting to retry"},
		{"recipient cap ignores others", 0, 2, "alice", []string{"bob", "bob", "alice"}, Queued, ""},
		{"no recipient is never capped per recipient", 0, 1, "", []string{"", ""}, Queued, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, s := newStore(t, "fcm")
			for i, r := range c.existing {
				e := env.laneEntry(t, s, "fcm", fmt.Sprintf("old-%d", i))
				v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: fmt.Sprintf("old-%d", i), Provider: "fcm", Recipient: r,
					Due: t0.Add(time.Minute), Attempt: 1, Job: e.Fields["job"], EnqueuedAtMs: ms(t0), Code: "PROVIDER_DOWN"})
				if err != nil || v != Queued {
					t.Fatalf("setup ToDelayed = %v, %v", v, err)
				}
			}
			k := s.Keys(0)
			e := env.laneEntry(t, s, "fcm", "new")
			v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: "new", Provider: "fcm", Recipient: c.recipient,
				Due: t0.Add(time.Minute), Attempt: 3, Job: e.Fields["job"], EnqueuedAtMs: ms(t0),
				MaxDelayed: c.maxDelayed, MaxPerRecipient: c.maxPer, Code: "RATE_LIMITED", At: t0})
			if err != nil || v != c.wantVerdict {
				t.Fatalf("ToDelayed = %v, %v; want %v", v, err, c.wantVerdict)
			}
			if n := env.xlen(t, e.Stream); n != 0 {
				t.Errorf("lane XLEN = %d, want 0", n)
			}
			if n := env.pending(t, e.Stream); n != 0 {
				t.Errorf("lane pending = %d, want 0", n)
			}
			dead := env.entries(t, k.Dead)
			inSet := env.c.ZScore(env.ctx, k.Delayed, "new").Err() == nil
			if c.wantVerdict == Queued {
				if len(dead) != 0 || !inSet {
					t.Fatalf("queued: dead=%d inSet=%v; want 0, true", len(dead), inSet)
				}
				return
			}
			if inSet || len(dead) != 1 {
				t.Fatalf("refused: inSet=%v dead=%d; want false, 1", inSet, len(dead))
			}
			want := map[string]string{"id": "new", "code": "RATE_LIMITED", "reason": c.wantReason, "from": e.Stream,
				"entry": e.ID, "provider": "fcm", "attempt": "2", "at": "1748779200000", "job": e.Fields["job"]}
			if d := cmp.Diff(want, fieldsOf(dead[0])); d != "" {
				t.Errorf("dead record (-want +got):\n%s", d)
			}
			// A refused retry leaves the recipient counts as they were.
			counts := env.c.HGetAll(env.ctx, k.Rcpt).Val()
			wantCounts := map[string]string{}
			for _, r := range c.existing {
				if r != "" {
					wantCounts[r] = itoa(mustAtoi(wantCounts[r]) + 1)
				}
			}
			if d := cmp.Diff(wantCounts, counts); d != "" {
				t.Errorf("rcpt (-want +got):\n%s", d)
			}
		})
	}
}

func mustAtoi(s string) int64 {
	var n int64
	fmt.Sscan(s, &n)
	return n
}

func TestToDelayedQueuedWrites(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	e := env.laneEntry(t, s, "fcm", "j1")
	due := t0.Add(90 * time.Second)
	v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: "j1", Provider: "fcm", Recipient: "alice", Due: due, Attempt: 2,
		Job: e.Fields["job"], EnqueuedAtMs: 1748779100000})
	if err != nil || v != Queued {
		t.Fatalf("ToDelayed = %v, %v", v, err)
	}
	if score := env.c.ZScore(env.ctx, k.Delayed, "j1").Val(); int64(score) != ms(due) {
		t.Errorf("due score = %v, want %d", score, ms(due))
	}
	if got := env.c.HGet(env.ctx, k.Rcpt, "alice").Val(); got != "1" {
		t.Errorf("rcpt alice = %q, want 1", got)
	}
	if !env.c.HExists(env.ctx, k.DelayedData, "j1").Val() {
		t.Error("no delayed data for j1")
	}
	if len(env.entries(t, k.Dead)) != 0 || len(env.entries(t, k.Results)) != 0 {
		t.Error("a queued retry wrote a dead or ledger record")
	}
	// A copy of the same job while the first waits: acknowledged with no record of its own,
	// and the waiting copy is left as it was.
	e2 := env.copyInLane(t, s, "fcm", "j1")
	v, err = s.ToDelayed(env.ctx, e2, RetryRecord{ID: "j1", Provider: "fcm", Due: t0, Attempt: 1, Job: e2.Fields["job"], At: t0})
	if err != nil || v != AckedCopy {
		t.Fatalf("copy ToDelayed = %v, %v; want %v", v, err, AckedCopy)
	}
	if n := len(env.entries(t, k.Dead)) + len(env.entries(t, k.Results)); n != 0 {
		t.Errorf("the copy wrote %d records; want none", n)
	}
	if score := env.c.ZScore(env.ctx, k.Delayed, "j1").Val(); int64(score) != ms(due) {
		t.Errorf("after the copy, due score = %v, want the first copy's %d", score, ms(due))
	}
	if n := len(env.entries(t, s.Keys(0).Lane("fcm"))); n != 0 {
		t.Errorf("the copy's lane entry is still there (%d entries)", n)
	}
}

func TestPromoteDue(t *testing.T) {
	env, s := newStore(t, "fcm", "apple")
	k := s.Keys(0)
	// A job with bytes encoders like to rewrite must come back byte for byte. (Bytes that are
	// not UTF-8 never get this far: job.Decode refuses them.)
	odd := `{"id":"j-odd","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh +
		`","auth":"` + testAuth + `"}},"payload":"caf` + "\xc3\xa9 \\u00e9 </> \\\" \x7f \xe2\x80\xa8 \xef\xbf\xbd" + `"}`
	if _, err := job.Decode([]byte(odd), t0); err != nil {
		t.Fatalf("odd job must be valid: %v", err)
	}
	type retry struct {
		id, provider, recipient string
		due                     time.Duration
		attempt                 int
		job                     string
	}
	retries := []retry{
		{"j-early", "fcm", "alice", 10 * time.Second, 1, ""},
		{"j-odd", "apple", "", 20 * time.Second, 4, odd},
		{"j-now", "fcm", "alice", 30 * time.Second, 2, ""},
		{"j-later", "fcm", "alice", 31 * time.Second, 1, ""},
	}
	for _, r := range retries {
		var e Entry
		if r.job == "" {
			e = env.laneEntry(t, s, r.provider, r.id)
			r.job = e.Fields["job"]
		} else {
			env.enqueue(t, s, r.job)
			in := env.readIntake(t, s, 1)[0]
			if ok, err := s.moveToLane(env.ctx, in, r.provider, r.job, ms(t0)); !ok || err != nil {
				t.Fatal(ok, err)
			}
			e = env.readLane(t, s, r.provider, 1)[0]
		}
		v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: r.id, Provider: r.provider, Recipient: r.recipient,
			Due: t0.Add(r.due), Attempt: r.attempt, Job: r.job, EnqueuedAtMs: ms(t0) - 5000})
		if err != nil || v != Queued {
			t.Fatalf("ToDelayed %s = %v, %v", r.id, v, err)
		}
	}
	// Nothing is due before its time.
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(9999*time.Millisecond), 100); err != nil || n != 0 {
		t.Fatalf("PromoteDue before due = %d, %v; want 0", n, err)
	}
	// The limit is honoured: oldest first.
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(30*time.Second), 1); err != nil || n != 1 {
		t.Fatalf("PromoteDue limit 1 = %d, %v; want 1", n, err)
	}
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(30*time.Second), 100); err != nil || n != 2 {
		t.Fatalf("PromoteDue = %d, %v; want 2 (due exactly now counts, later does not)", n, err)
	}
	if got := env.c.ZRange(env.ctx, k.Delayed, 0, -1).Val(); !cmp.Equal(got, []string{"j-later"}) {
		t.Errorf("delayed left = %v, want [j-later]", got)
	}
	if got := env.c.HKeys(env.ctx, k.DelayedData).Val(); !cmp.Equal(got, []string{"j-later"}) {
		t.Errorf("delayed data left = %v, want [j-later]", got)
	}
	if got := env.c.HGetAll(env.ctx, k.Rcpt).Val(); !cmp.Equal(got, map[string]string{"alice": "1"}) {
		t.Errorf("rcpt = %v, want alice 1", got)
	}
	fcm := env.readLane(t, s, "fcm", 2)
	apple := env.readLane(t, s, "apple", 1)
	enq := itoa(ms(t0) - 5000)
	want := []map[string]string{
		{"job": validJob("j-early"), "provider": "fcm", "attempt": "1", "enqueued_at": enq},
		{"job": validJob("j-now"), "provider": "fcm", "attempt": "2", "enqueued_at": enq},
	}
	if d := cmp.Diff(want, []map[string]string{fcm[0].Fields, fcm[1].Fields}); d != "" {
		t.Errorf("fcm lane (-want +got):\n%s", d)
	}
	wantOdd := map[string]string{"job": odd, "provider": "apple", "attempt": "4", "enqueued_at": enq}
	if d := cmp.Diff(wantOdd, apple[0].Fields); d != "" {
		t.Errorf("apple lane (-want +got):\n%s", d)
	}
	// Promoted entries are new entries, newer than anything that was in the lane.
	if !idLess(fcm[0].ID, fcm[1].ID) {
		t.Errorf("lane ids not increasing: %s, %s", fcm[0].ID, fcm[1].ID)
	}
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("last PromoteDue = %d, %v; want 1", n, err)
	}
	if env.c.Exists(env.ctx, k.Rcpt).Val() != 0 {
		t.Errorf("rcpt should be empty once no recipient has a job waiting: %v", env.c.HGetAll(env.ctx, k.Rcpt).Val())
	}
}

func TestPromoteDueUnreadableData(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	env.c.ZAdd(env.ctx, k.Delayed, redisZ(1, "ghost"))
	env.c.HSet(env.ctx, k.DelayedData, "broken", "{not json")
	env.c.ZAdd(env.ctx, k.Delayed, redisZ(2, "broken"))
	n, err := s.PromoteDue(env.ctx, 0, t0, 10)
	if err != nil || n != 0 {
		t.Fatalf("PromoteDue = %d, %v; want 0", n, err)
	}
	dead := env.entries(t, k.Dead)
	if len(dead) != 2 {
		t.Fatalf("dead has %d entries, want 2", len(dead))
	}
	for i, id := range []string{"ghost", "broken"} {
		f := fieldsOf(dead[i])
		if f["id"] != id || f["reason"] != "delayed member has no readable data" {
			t.Errorf("dead[%d] = %v", i, f)
		}
	}
	if env.c.ZCard(env.ctx, k.Delayed).Val() != 0 {
		t.Error("unreadable members stayed in the delayed set")
	}
}

// TestDelayedCapIsPerProviderAndSparesPutBacks: one provider's retries filling its cap do not
// refuse another provider's retry, and put-backs (no attempt made) neither count toward the
// cap nor are refused by it; a promoted retry frees its room in its provider's count.
func TestDelayedCapIsPerProviderAndSparesPutBacks(t *testing.T) {
	env, s := newStore(t, "fcm", "apple")
	k := s.Keys(0)
	toDelayed := func(provider, id, code string) RetryVerdict {
		t.Helper()
		e := env.laneEntry(t, s, provider, id)
		v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: id, Provider: provider, Due: t0.Add(time.Minute), Attempt: 1,
			Job: e.Fields["job"], EnqueuedAtMs: ms(t0), MaxDelayed: 2, Code: code, At: t0})
		if err != nil {
			t.Fatalf("ToDelayed(%s) = %v", id, err)
		}
		return v
	}
	for i := range 5 { // put-backs of fcm: more than the cap, none refused
		if v := toDelayed("fcm", fmt.Sprintf("parked-%d", i), ""); v != Queued {
			t.Fatalf("fcm put-back %d: %v, want queued", i, v)
		}
	}
	for i := range 2 {
		if v := toDelayed("fcm", fmt.Sprintf("fcm-%d", i), "RATE_LIMITED"); v != Queued {
			t.Fatalf("fcm retry %d: %v, want queued (put-backs do not count)", i, v)
		}
	}
	if v := toDelayed("fcm", "fcm-full", "RATE_LIMITED"); v != DeadGlobalCap {
		t.Fatalf("fcm's third retry: %v, want dead: delayed set full", v)
	}
	d := env.entries(t, k.Dead)
	if len(d) != 1 || d[0].Values["reason"] != "delayed set is full for fcm (2 retries waiting); not retried" || d[0].Values["provider"] != "fcm" {
		t.Fatalf("dead records %v; want the one refused fcm retry, naming fcm", d)
	}
	if v := toDelayed("apple", "apple-0", "PROVIDER_DOWN"); v != Queued {
		t.Fatalf("apple's retry beside a full fcm: %v, want queued", v)
	}
	if v := toDelayed("fcm", "parked-late", ""); v != Queued {
		t.Fatalf("fcm put-back beside its full cap: %v, want queued", v)
	}
	if got := env.c.HGetAll(env.ctx, k.DelayedCount).Val(); !cmp.Equal(got, map[string]string{"fcm": "2", "apple": "1"}) {
		t.Errorf("counts %v, want fcm 2, apple 1", got)
	}
	// Promoting everything frees fcm's room, and the empty set takes its counts along.
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Hour), 100); err != nil || n != 9 {
		t.Fatalf("PromoteDue = %d, %v; want 9", n, err)
	}
	if n := env.c.Exists(env.ctx, k.DelayedCount).Val(); n != 0 {
		t.Errorf("counts after the set emptied: %v", env.c.HGetAll(env.ctx, k.DelayedCount).Val())
	}
	if v := toDelayed("fcm", "fcm-again", "RATE_LIMITED"); v != Queued {
		t.Fatalf("fcm retry after the promotion: %v, want queued", v)
	}
}

// TestPromoteTakesRetriesOffTheirProviderCount: a promoted retry leaves its provider's count
// while the others stay, and a count is never read above the set's size.
func TestPromoteTakesRetriesOffTheirProviderCount(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	for i, due := range []time.Duration{time.Second, time.Hour} {
		e := env.laneEntry(t, s, "fcm", fmt.Sprintf("r%d", i))
		if v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: fmt.Sprintf("r%d", i), Provider: "fcm", Due: t0.Add(due), Attempt: 1,
			Job: e.Fields["job"], EnqueuedAtMs: ms(t0), Code: "PROVIDER_DOWN", At: t0}); err != nil || v != Queued {
			t.Fatalf("ToDelayed = %v, %v", v, err)
		}
	}
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Minute), 100); err != nil || n != 1 {
		t.Fatalf("PromoteDue = %d, %v; want 1", n, err)
	}
	if got := env.c.HGet(env.ctx, k.DelayedCount, "fcm").Val(); got != "1" {
		t.Errorf("fcm's count after one of two promoted: %q, want 1", got)
	}
	// A count left too high (by a release that did not keep it) refuses no more than the set holds.
	env.c.HSet(env.ctx, k.DelayedCount, "fcm", 50)
	e := env.laneEntry(t, s, "fcm", "r2")
	if v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: "r2", Provider: "fcm", Due: t0.Add(time.Hour), Attempt: 1,
		Job: e.Fields["job"], EnqueuedAtMs: ms(t0), MaxDelayed: 2, Code: "PROVIDER_DOWN", At: t0}); err != nil || v != Queued {
		t.Fatalf("ToDelayed with a stale count of 50 and 1 member: %v, %v; want queued", v, err)
	}
}
