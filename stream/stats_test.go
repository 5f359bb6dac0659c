package stream

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestQueueStats: lengths, lag, pending and the oldest pending entry of every stream of a
// shard, and the delayed set's due members, from one script.
func TestQueueStats(t *testing.T) {
	env, s := newStore(t, "fcm", "apple")
	e := env.laneEntry(t, s, "fcm", "read")         // pending in fcm's lane
	env.enqueue(t, s, validJob("a"), validJob("b")) // two unread in the intake
	for i, due := range []time.Time{t0, t0.Add(time.Hour)} {
		l := env.laneEntry(t, s, "apple", "retry-"+string(rune('a'+i)))
		if v, err := s.ToDelayed(env.ctx, l, RetryRecord{ID: "retry-" + string(rune('a'+i)), Provider: "apple", Due: due, Attempt: 1, Job: l.Fields["job"]}); v != Queued || err != nil {
			t.Fatal(v, err)
		}
	}
	got, err := s.QueueStats(env.ctx, 0, []string{"fcm", "apple", "wns"}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	k := s.Keys(0)
	want := []QueueStat{
		{Stream: "intake", Key: k.Intake, Entries: 2, Lag: 2},
		{Stream: "intake:bulk", Key: k.BulkIntake},
		{Stream: "delayed", Key: k.Delayed, Entries: 2, Lag: -1, DueNow: 1, NextDue: t0},
		{Stream: "dead", Key: k.Dead, Lag: -1},
		{Stream: "results", Key: k.Results, Lag: -1},
		{Stream: "gone", Key: k.Gone, Lag: -1},
		{Stream: "lane:fcm", Key: k.Lane("fcm"), Entries: 1, Lag: 0, Pending: 1, OldestPending: entryTime(e.ID)},
		{Stream: "lane:fcm:bulk", Key: k.BulkLane("fcm")},
		{Stream: "lane:apple", Key: k.Lane("apple"), Lag: 0},
		{Stream: "lane:apple:bulk", Key: k.BulkLane("apple")},
		{Stream: "lane:wns", Key: k.Lane("wns")},
		{Stream: "lane:wns:bulk", Key: k.BulkLane("wns")},
	}
	if d := cmp.Diff(want, got, cmpopts.EquateApproxTime(0)); d != "" {
		t.Errorf("QueueStats (-want +got):\n%s", d)
	}
	if got[6].OldestPending.IsZero() || time.Since(got[6].OldestPending) > time.Minute {
		t.Errorf("oldest pending %v; want the lane entry's time", got[6].OldestPending)
	}
}
