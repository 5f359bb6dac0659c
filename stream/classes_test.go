package stream

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestBulkLaneRoundTrip: a bulk job moves to its provider's bulk lane (the transactional lane
// stays empty), is read there, waits to retry and comes back to the bulk lane when due, while
// a transactional job keeps to the lane it always had. WaitLanes wakes for either class, and
// Lanes names the provider once with both its lanes (the operators' views too:
// stream/inspect's TestBulkLanesInTheOperatorsViews).
func TestBulkLaneRoundTrip(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	env.enqueue(t, s, validJob("tx"), validJob("bulk"))
	for _, in := range env.readIntake(t, s, 2) {
		class := job.ClassTransactional
		if jobID(in.Fields["job"]) == "bulk" {
			class = job.ClassBulk
		}
		if v, err := s.ToLane(env.ctx, in, "fcm", class, jobID(in.Fields["job"]), in.Fields["job"], ms(t0)); v != Moved || err != nil {
			t.Fatalf("ToLane %s = %v, %v", class, v, err)
		}
	}
	if n, b := len(env.entries(t, k.Lane("fcm"))), len(env.entries(t, k.BulkLane("fcm"))); n != 1 || b != 1 {
		t.Fatalf("lane holds %d, bulk lane %d; want 1 each", n, b)
	}
	got, err := s.readLane(env.ctx, 0, "fcm", job.ClassBulk, 10, 0)
	if err != nil || len(got) != 1 || got[0].Stream != k.BulkLane("fcm") || jobID(got[0].Fields["job"]) != "bulk" {
		t.Fatalf("ReadLane bulk = %v, %v; want the bulk job from %s", got, err, k.BulkLane("fcm"))
	}
	if c := ClassOfLane(got[0].Stream); c != job.ClassBulk {
		t.Errorf("ClassOfLane(%s) = %s", got[0].Stream, c)
	}
	r := RetryRecord{ID: "bulk", Provider: "fcm", Due: t0, Attempt: 1, Job: got[0].Fields["job"], EnqueuedAtMs: ms(t0), Class: job.ClassBulk}
	if v, err := s.ToDelayed(env.ctx, got[0], r); v != Queued || err != nil {
		t.Fatalf("ToDelayed = %v, %v", v, err)
	}
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Second), 10); n != 1 || err != nil {
		t.Fatalf("PromoteDue = %d, %v", n, err)
	}
	back := env.entries(t, k.BulkLane("fcm"))
	if len(back) != 1 || back[0].Values["attempt"] != "1" || len(env.entries(t, k.Lane("fcm"))) != 1 {
		t.Fatalf("after promotion: bulk lane %v, lane %d entries; want the retry back in the bulk lane", back, len(env.entries(t, k.Lane("fcm"))))
	}

	// Both lanes have a new entry: one read takes both, transactional first; the next finds the
	// lanes drained and says where they stand, and WaitLanes wakes for the next entry.
	w, drained, err := s.ReadLanes(env.ctx, 0, "fcm", LaneRead{Total: 2, BulkMax: 2})
	if err != nil || drained != nil || len(w) != 2 || w[0].Stream != k.Lane("fcm") || w[1].Stream != k.BulkLane("fcm") {
		t.Fatalf("ReadLanes = %v, %v, %v; want the transactional entry, then the bulk one", w, drained, err)
	}
	none, drained, err := s.ReadLanes(env.ctx, 0, "fcm", LaneRead{Total: 2, BulkMax: 2})
	if err != nil || len(none) != 0 || drained == nil {
		t.Fatalf("a read of drained lanes = %v, %v, %v; want nothing and where they stand", none, drained, err)
	}
	if arrived, err := s.WaitLanes(env.ctx, 0, "fcm", *drained, true, 20*time.Millisecond); arrived || err != nil {
		t.Fatalf("WaitLanes of quiet lanes = %v, %v; want false", arrived, err)
	}
	env.c.XAdd(env.ctx, &redis.XAddArgs{Stream: k.BulkLane("fcm"), Values: []any{"job", validJob("late"), "provider", "fcm", "attempt", "0", "enqueued_at", "1"}})
	if arrived, err := s.WaitLanes(env.ctx, 0, "fcm", *drained, false, 20*time.Millisecond); arrived || err != nil {
		t.Fatalf("WaitLanes of the transactional lane alone, after a bulk entry arrived = %v, %v; want false", arrived, err)
	}
	if arrived, err := s.WaitLanes(env.ctx, 0, "fcm", *drained, true, time.Second); !arrived || err != nil {
		t.Fatalf("WaitLanes after an entry arrived = %v, %v; want true", arrived, err)
	}

	lanes, err := s.Lanes(env.ctx, 0)
	if err != nil || len(lanes) != 1 || lanes[0].Provider != "fcm" {
		t.Errorf("Lanes = %v, %v; want fcm once", lanes, err)
	} else if l := lanes[0]; l.Length != 3 || l.Pending != 2 || l.Err != nil {
		t.Errorf("Lanes measured fcm at %d, %d, %v; want both lanes' 3 entries, 2 pending", l.Length, l.Pending, l.Err)
	}
}

func TestLaneNames(t *testing.T) {
	for _, c := range []struct {
		name     string
		provider string
		class    job.Class
		ok       bool
	}{
		{"lane:fcm", "fcm", job.ClassTransactional, true},
		{"lane:fcm:bulk", "fcm", job.ClassBulk, true},
		{"lane::bulk", "", "", false},
		{"lane:", "", "", false},
		{"intake", "", "", false},
	} {
		p, class, ok := ParseLaneName(c.name)
		if p != c.provider || class != c.class || ok != c.ok {
			t.Errorf("ParseLaneName(%q) = %q, %q, %v", c.name, p, class, ok)
		}
		if c.ok && LaneName(p, class) != c.name {
			t.Errorf("LaneName(%q, %q) = %q", p, class, LaneName(p, class))
		}
	}
}
