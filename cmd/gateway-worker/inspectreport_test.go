package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// TestWriteInspect: each place a job can be in prints its line (a lane entry in flight with a
// consumer that is not alive, a retry with its last outcome, a put-back, a scheduled job, a
// job held with its lane entry not among those read), its records with their notes, the sent
// mark and the cut scans.
func TestWriteInspect(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	reports := []inspect.InspectReport{
		{ID: "nope", Prefix: "wp", Shard: 1},
		{ID: "j1", Prefix: "wp", Shard: 0, Found: true, SentMark: true,
			Intake: []inspect.InspectPlace{{Key: "wp:{0}:in", EntryID: "1-0"},
				{Key: "wp:{0}:in", EntryID: "2-0", Pending: &inspect.InspectPending{Consumer: "c1", ConsumerAlive: true, IdleSeconds: 12.3, Deliveries: 2}}},
			Lane:    &inspect.InspectPlace{Key: "wp:{0}:lane:fcm", EntryID: "3-0", Attempt: 2, Pending: &inspect.InspectPending{Consumer: "c2", IdleSeconds: 70, Deliveries: 1}},
			Delayed: &inspect.InspectDelayed{Due: now.Add(30 * time.Second), Provider: "fcm", Attempt: 3, Recipient: "user-1", LastCode: "TIMEOUT", LastDetail: "no answer"},
			Results: []inspect.InspectLedger{{EntryID: "4-0", Provider: "fcm", Code: "ACCEPTED", Status: 201, Attempt: 1, At: now},
				{EntryID: "5-0", Code: "EXPIRED", Detail: "ttl ran out", At: now}},
			Dead: []inspect.InspectDead{{EntryID: "6-0", Code: "INVALID_JOB", Reason: "bad", At: now, Note: "cut"},
				{EntryID: "7-0", Code: "GONE", Provider: "apple", Attempt: 2, Reason: "gone", At: now}},
			ScanLimit: 10, ScanCut: []string{"wp:{0}:in", "wp:{0}:results"}},
		{ID: "j2", Prefix: "wp", Found: true, Lane: &inspect.InspectPlace{Key: "L", EntryID: "1-1"},
			Delayed: &inspect.InspectDelayed{Due: now.Add(-5 * time.Second), Provider: "wns", Attempt: 1}},
		{ID: "j3", Prefix: "wp", Found: true, HeldBy: "apple", Delayed: &inspect.InspectDelayed{Due: now.Add(time.Hour), Provider: "apple", Scheduled: true}},
		{ID: "j4", Prefix: "wp", Found: true, HeldBy: "apple"},
		{ID: "j5", Prefix: "wp", Found: true, Delayed: &inspect.InspectDelayed{Due: now, Provider: "apple", Attempt: 2, LastCode: "PROVIDER_DOWN"}},
	}
	var b strings.Builder
	for _, r := range reports {
		writeInspect(&b, r, now)
	}
	want := `job nope: shard 1 of prefix wp
  not found: never enqueued under this prefix, or its records were trimmed
job j1: shard 0 of prefix wp
  in the intake, not routed yet: wp:{0}:in entry 1-0, not read by any consumer yet
  in the intake, not routed yet: wp:{0}:in entry 2-0, read by consumer c1 (alive), last delivered 12s ago, 2 deliveries
  in flight: wp:{0}:lane:fcm entry 3-0, attempt 2, read by consumer c2 (not alive: another worker reclaims it after --visibility-timeout), last delivered 1m10s ago, 1 deliveries
  waiting to retry: due 2026-03-04T05:06:37Z (in 30s) as attempt 3 on fcm
    last attempt (2): TIMEOUT: no answer
    recipient user-1
  ended: ACCEPTED (HTTP 201) on fcm at attempt 1 (0 is the first), 2026-03-04T05:06:07Z; ledger entry 4-0
  ended: EXPIRED on - at attempt 0 (0 is the first), 2026-03-04T05:06:07Z; ledger entry 5-0
    detail: ttl ran out
  dead-lettered: INVALID_JOB at the intake, 2026-03-04T05:06:07Z; dead entry 6-0 (gateway-worker dead show 6-0)
    reason: bad
    note: cut
  dead-lettered: GONE on apple at attempt 2, 2026-03-04T05:06:07Z; dead entry 7-0 (gateway-worker dead show 7-0)
    reason: gone
  sent mark set: accepted within the sent-mark window; a copy enqueued now is acknowledged unsent
  scan cut: only 10 entries of wp:{0}:in, wp:{0}:results were read (--scan-limit; the intake and lanes oldest first, the ledger and dead stream newest first): the job may be in the rest
job j2: shard 0 of prefix wp
  waiting in its lane: L entry 1-1, attempt 0, not read by any consumer yet
  waiting to retry: due 2026-03-04T05:06:02Z (5s ago) as attempt 1 on wns
    put back without an attempt (its breaker, its host's limits or a share refused it), or queued by an older worker
job j3: shard 0 of prefix wp
  scheduled: waiting for its send_at 2026-03-04T06:06:07Z (in 1h0m0s), then sent on apple (its ttl counts from then)
job j4: shard 0 of prefix wp
  held for provider apple (the jobs index) but its lane entry was not among the entries read
job j5: shard 0 of prefix wp
  waiting to retry: due 2026-03-04T05:06:07Z (0s ago) as attempt 2 on apple
    last attempt (1): PROVIDER_DOWN
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("writeInspect (-want +got):\n%s", d)
	}
}
