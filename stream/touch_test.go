package stream

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTransitionTouchesOnlyNextPlace: each transition changes the entry's stream and exactly
// the keys of the job's next place, nothing else; the jobs index gains a job when it enters a
// lane and loses it when the job ends.
func TestTransitionTouchesOnlyNextPlace(t *testing.T) {
	k := KeysFor("", 0)
	lane := k.Lane("fcm")
	cases := []struct {
		name   string
		intake bool
		do     func(s *Store, e Entry) error
		want   []string
	}{
		{"ToLane", true, func(s *Store, e Entry) error {
			_, err := s.moveToLane(t.Context(), e, "fcm", e.Fields["job"], 1)
			return err
		}, []string{k.Intake, lane, k.Jobs}},
		{"ToDead", true, func(s *Store, e Entry) error {
			_, err := s.ToDead(t.Context(), e, DeadRecord{Code: "INVALID_JOB", At: t0})
			return err
		}, []string{k.Intake, k.Dead}},
		{"Finish", false, func(s *Store, e Entry) error {
			_, err := s.Finish(t.Context(), e, Result{ID: "j", Code: "INVALID_REQUEST", At: t0})
			return err
		}, []string{lane, k.Results, k.Jobs}},
		{"Finish sent", false, func(s *Store, e Entry) error {
			_, err := s.Finish(t.Context(), e, Result{ID: "j", Code: "ACCEPTED", Sent: true, At: t0})
			return err
		}, nil}, // the keys of the window's slice, added below
		{"Finish gone", false, func(s *Store, e Entry) error {
			_, err := s.Finish(t.Context(), e, Result{ID: "j", Code: "GONE", Gone: true, MarkGone: true, Endpoint: testEndpoint, At: t0})
			return err
		}, []string{lane, k.Results, k.Gone, k.GoneMark(testEndpoint), k.Jobs}},
		{"Finish key mismatch", false, func(s *Store, e Entry) error {
			_, err := s.Finish(t.Context(), e, Result{ID: "j", Code: "KEY_MISMATCH", Gone: true, Endpoint: testEndpoint, At: t0})
			return err
		}, []string{lane, k.Results, k.Gone, k.Jobs}},
		{"AckSent", false, func(s *Store, e Entry) error {
			_, err := s.AckSent(t.Context(), e, jobID(e.Fields["job"]))
			return err
		}, []string{lane, k.Jobs}},
		{"ToDelayed", false, func(s *Store, e Entry) error {
			_, err := s.ToDelayed(t.Context(), e, RetryRecord{ID: "j", Provider: "fcm", Recipient: "r", Due: t0.Add(time.Minute), Attempt: 1, Job: e.Fields["job"]})
			return err
		}, []string{lane, k.Delayed, k.DelayedData, k.Rcpt}},
		{"ToDelayed refused", false, func(s *Store, e Entry) error {
			_, err := s.ToDelayed(t.Context(), e, RetryRecord{ID: "j", Provider: "fcm", Recipient: "r", Due: t0, Attempt: 1, Job: e.Fields["job"], MaxPerRecipient: 1})
			return err
		}, []string{lane, k.Dead, k.Jobs}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, s := newStore(t, "fcm")
			if c.name == "ToDelayed refused" {
				env.c.HSet(env.ctx, k.Rcpt, "r", 1) // r already has one retry waiting
			}
			var e Entry
			if c.intake {
				env.enqueue(t, s, validJob("j"))
				e = env.readIntake(t, s, 1)[0]
			} else {
				e = env.laneEntry(t, s, "fcm", "j")
			}
			before := env.snapshot(t)
			if err := c.do(s, e); err != nil {
				t.Fatal(err)
			}
			after := env.snapshot(t)
			var changed []string
			for key, v := range after {
				if before[key] != v {
					changed = append(changed, key)
				}
			}
			for key := range before {
				if _, ok := after[key]; !ok {
					changed = append(changed, key)
				}
			}
			sort.Strings(changed)
			want := append([]string(nil), c.want...)
			if c.name == "Finish sent" {
				// The lane, the ledger, the index, and the slice of the window the job went to:
				// its fan-out and count, and the job's bucket (a fresh window has 256).
				want = append([]string{lane, k.Results, k.Jobs}, windowKeysOf(t, env, k.Window, DefaultSentTTL, 256, "j")...)
			}
			sort.Strings(want)
			if d := cmp.Diff(want, changed); d != "" {
				t.Errorf("changed keys (-want +got):\n%s", d)
			}
		})
	}
}
