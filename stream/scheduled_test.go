package stream

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestToScheduled: an intake entry goes to the delayed set due at its send_at, indexed as
// held, with data the promoter writes back to its class's lane at attempt 0; a second copy is
// acknowledged as a copy, an entry another consumer owns changes nothing, and the promoter
// drops the scheduled mark once the member is due.
func TestToScheduled(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	env.enqueue(t, s, validJob("s1"), validJob("s1"))
	es := env.readIntake(t, s, 2)
	sendAt := t0.Add(time.Hour)
	rec := ScheduledRecord{ID: "s1", Provider: "fcm", Class: job.ClassBulk, Job: es[0].Fields["job"], EnqueuedAtMs: ms(t0), SendAt: sendAt, At: t0}

	other := env.store(t, "other", Options{}, "fcm")
	if v, err := other.ToScheduled(env.ctx, es[0], rec); err != nil || v != LaneNotOwner {
		t.Fatalf("another consumer's ToScheduled = %v, %v; want not owner", v, err)
	}
	if v, err := s.ToScheduled(env.ctx, es[0], rec); err != nil || v != Moved {
		t.Fatalf("ToScheduled = %v, %v; want moved", v, err)
	}
	if v, err := s.ToScheduled(env.ctx, es[1], rec); err != nil || v != Copy {
		t.Fatalf("ToScheduled of a copy = %v, %v; want copy", v, err)
	}
	if n := env.xlen(t, k.Intake); n != 0 {
		t.Errorf("intake XLEN = %d, want 0", n)
	}
	if due, err := env.c.ZScore(env.ctx, k.Delayed, "s1").Result(); err != nil || int64(due) != ms(sendAt) {
		t.Errorf("delayed score = %v, %v; want the send_at", due, err)
	}
	if p, _ := env.c.HGet(env.ctx, k.Jobs, "s1").Result(); p != "fcm" {
		t.Errorf("jobs index = %q, want fcm", p)
	}
	var d map[string]any
	raw, _ := env.c.HGet(env.ctx, k.DelayedData, "s1").Result()
	if err := json.Unmarshal([]byte(raw), &d); err != nil || d["scheduled"] != true || d["class"] != "bulk" || d["recipient"] != nil || d["attempt"] != float64(0) {
		t.Errorf("delayed data %s", raw)
	}
	if n, _ := env.c.HLen(env.ctx, k.DelayedCount).Result(); n != 0 {
		t.Errorf("delayed:count has %d fields; a scheduled job counts toward no cap", n)
	}
	qs, err := s.QueueStats(env.ctx, 0, []string{"fcm"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Stream == "delayed" && (q.Entries != 1 || q.Scheduled != 1 || !q.NextSendAt.Equal(sendAt)) {
			t.Errorf("delayed row %+v, want 1 member, 1 scheduled, next send_at the send_at", q)
		}
	}
	if n, err := s.PromoteDue(env.ctx, 0, sendAt.Add(-time.Millisecond), 10); err != nil || n != 0 {
		t.Fatalf("PromoteDue before the send_at = %d, %v", n, err)
	}
	if n, err := s.PromoteDue(env.ctx, 0, sendAt, 10); err != nil || n != 1 {
		t.Fatalf("PromoteDue at the send_at = %d, %v", n, err)
	}
	lane := env.entries(t, k.BulkLane("fcm"))
	if len(lane) != 1 || fieldsOf(lane[0])["attempt"] != "0" || fieldsOf(lane[0])["enqueued_at"] != itoa(ms(t0)) {
		t.Errorf("bulk lane %v, want the job at attempt 0 with its enqueued_at", lane)
	}
	if n, _ := env.c.ZCard(env.ctx, k.Scheduled).Result(); n != 0 {
		t.Errorf("delayed:scheduled holds %d members after the promotion", n)
	}
}
