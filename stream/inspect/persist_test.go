package inspect

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestStateSurvivesRedisKill: with AOF appendfsync always, everything a script wrote before
// Redis was SIGKILLed is there after it restarts: entries, pending ownership, delayed
// retries, marks, records.
func TestStateSurvivesRedisKill(t *testing.T) {
	env, s := newStore(t, "fcm")
	k := s.Keys(0)
	lanePending := env.laneEntry(t, s, "fcm", "pending-lane")
	done := env.laneEntry(t, s, "fcm", "done")
	mustOK(t)(s.Finish(env.ctx, done, stream.Result{ID: "done", Provider: "fcm", Code: "ACCEPTED", Sent: true, At: t0}))
	retry := env.laneEntry(t, s, "fcm", "retry")
	if v, err := s.ToDelayed(env.ctx, retry, stream.RetryRecord{ID: "retry", Provider: "fcm", Recipient: "r", Due: t0, Attempt: 1, Job: retry.Fields["job"]}); v != stream.Queued || err != nil {
		t.Fatal(v, err)
	}
	env.enqueue(t, s, validJob("pending-intake"), validJob("unread"))
	env.readIntake(t, s, 1)
	before := env.snapshot(t)
	pendingBefore := env.c.XPendingExt(env.ctx, redisPendingArgs(k.Lane("fcm"))).Val()

	env.srv.Kill()
	env.srv.Restart()

	if d := cmp.Diff(before, env.snapshot(t)); d != "" {
		t.Fatalf("state changed across kill -9 (-before +after):\n%s", d)
	}
	pendingAfter := env.c.XPendingExt(env.ctx, redisPendingArgs(k.Lane("fcm"))).Val()
	if len(pendingAfter) != 1 || pendingAfter[0].ID != pendingBefore[0].ID || pendingAfter[0].Consumer != "w1" {
		t.Fatalf("lane pending after restart = %+v, before %+v", pendingAfter, pendingBefore)
	}
	// The owner can still finish its pending entry; scripts are re-sent after the restart
	// flushed the script cache (EVALSHA falls back to EVAL).
	mustOK(t)(s.Finish(env.ctx, lanePending, stream.Result{ID: "pending-lane", Provider: "fcm", Code: "ACCEPTED", At: t0}))
	if sent, err := s.WasSent(env.ctx, 0, "done"); !sent || err != nil {
		t.Errorf("sent mark lost: %v, %v", sent, err)
	}
	if n, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Second), 10); n != 1 || err != nil {
		t.Errorf("PromoteDue after restart = %d, %v", n, err)
	}
	rep, _, err := inspectorOf(s).Audit(env.ctx, []string{"unread", "pending-intake", "pending-lane", "done", "retry"})
	if err != nil {
		t.Fatal(err)
	}
	want := AuditReport{Total: 5, ExactlyOne: 2, None: 3,
		NoneWhere: map[string]int{"pending": 1, "intake": 1, "lane:fcm": 1},
		Missing:   []string{"unread", "pending-intake", "retry"}}
	// retry was promoted back to lane:fcm above.
	if d := cmp.Diff(want, rep); d != "" {
		t.Errorf("Audit after restart (-want +got):\n%s", d)
	}
}
