package stream

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestNoTrimOfGroupedStreams drives many transitions in random order, with the record
// streams capped as tightly as an operator could, and then proves: the intake and every lane
// hold exactly the entries not yet finished (finished ones were deleted, so memory stays
// bounded), and no unread or pending entry was removed.
func TestNoTrimOfGroupedStreams(t *testing.T) {
	env := newEnv(t)
	o := Options{ResultsMaxLen: 5, GoneMaxLen: 5, DeadMaxLen: 5}
	s := env.store(t, "w1", o, "fcm", "apple", "wns")
	rng := rand.New(rand.NewPCG(1, 2))
	providers := []string{"fcm", "apple", "wns"}

	// want: job id -> the stream it must still be in.
	want := map[string]string{}
	var inPending []Entry
	lanePending := map[string][]Entry{}
	next := 0
	for round := 0; round < 40; round++ {
		// Upstream adds a few jobs.
		for range 8 {
			id := fmt.Sprintf("j%04d", next)
			next++
			env.enqueue(t, s, validJob(id))
			want[id] = s.Keys(0).Intake
		}
		// Intake reads some (they stay pending) and moves or kills some of its pending ones.
		got, _, err := s.ReadIntake(env.ctx, 0, job.ClassTransactional, rng.IntN(8), 0)
		if err != nil {
			t.Fatal(err)
		}
		inPending = append(inPending, got...)
		rng.Shuffle(len(inPending), func(i, j int) { inPending[i], inPending[j] = inPending[j], inPending[i] })
		for len(inPending) > 0 && rng.IntN(3) > 0 {
			e := inPending[0]
			inPending = inPending[1:]
			id := jobID(e.Fields["job"])
			if rng.IntN(10) == 0 {
				mustOK(t)(s.ToDead(env.ctx, e, DeadRecord{ID: id, Code: "INVALID_JOB", Reason: "test", Job: e.Fields["job"], At: t0}))
				delete(want, id)
				continue
			}
			p := providers[rng.IntN(len(providers))]
			mustOK(t)(s.moveToLane(env.ctx, e, p, e.Fields["job"], ms(t0)))
			want[id] = s.Keys(0).Lane(p)
		}
		// Lane consumers read some and finish, retry, or ack some of what they hold.
		for _, p := range providers {
			got, err := s.readLane(env.ctx, 0, p, job.ClassTransactional, rng.IntN(5), 0)
			if err != nil {
				t.Fatal(err)
			}
			lanePending[p] = append(lanePending[p], got...)
			for len(lanePending[p]) > 0 && rng.IntN(2) == 0 {
				e := lanePending[p][0]
				lanePending[p] = lanePending[p][1:]
				id := jobID(e.Fields["job"])
				switch rng.IntN(4) {
				case 0:
					mustOK(t)(s.Finish(env.ctx, e, Result{ID: id, Provider: p, Code: "ACCEPTED", Sent: true, At: t0}))
					delete(want, id)
				case 1:
					mustOK(t)(s.Finish(env.ctx, e, Result{ID: id, Provider: p, Code: "GONE", Gone: true, MarkGone: true, Endpoint: testEndpoint, At: t0}))
					delete(want, id)
				case 2:
					v, err := s.ToDelayed(env.ctx, e, RetryRecord{ID: id, Provider: p, Due: t0.Add(time.Duration(rng.IntN(100)) * time.Second),
						Attempt: 1, Job: e.Fields["job"], EnqueuedAtMs: ms(t0)})
					if err != nil || v != Queued {
						t.Fatalf("ToDelayed = %v, %v", v, err)
					}
					want[id] = "delayed:" + s.Keys(0).Lane(p)
				case 3:
					mustOK(t)(s.AckSent(env.ctx, e, jobID(e.Fields["job"])))
					delete(want, id)
				}
			}
		}
		// The promoter brings some retries back.
		if _, err := s.PromoteDue(env.ctx, 0, t0.Add(time.Duration(round)*3*time.Second), 5); err != nil {
			t.Fatal(err)
		}
		for _, id := range env.c.ZRange(env.ctx, s.Keys(0).Delayed, 0, -1).Val() {
			if !strings.HasPrefix(want[id], "delayed:") {
				t.Fatalf("%s is in the delayed set but should be in %q", id, want[id])
			}
		}
		for id, where := range want {
			lane, ok := strings.CutPrefix(where, "delayed:")
			if ok && env.c.ZScore(env.ctx, s.Keys(0).Delayed, id).Err() != nil {
				// Promoted: back in the lane of its provider, its data gone.
				if env.c.HExists(env.ctx, s.Keys(0).DelayedData, id).Val() {
					t.Fatalf("%s promoted but its data stayed", id)
				}
				want[id] = lane
			}
		}
		// Check the invariant every round.
		check(t, env, s, providers, want)
	}
	if next < 300 {
		t.Fatalf("only %d jobs", next)
	}
}

func mustOK(t *testing.T) func(bool, error) {
	return func(ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("transition = %v, %v", ok, err)
		}
	}
}

// check compares the ids in the intake and lanes with want, and XLEN with the same counts.
func check(t *testing.T, env *env, s *Store, providers []string, want map[string]string) {
	t.Helper()
	streams := []string{s.Keys(0).Intake}
	for _, p := range providers {
		streams = append(streams, s.Keys(0).Lane(p))
	}
	got := map[string]string{}
	for _, st := range streams {
		ms := env.entries(t, st)
		if n := env.xlen(t, st); n != int64(len(ms)) {
			t.Fatalf("%s: XLEN %d but XRANGE %d", st, n, len(ms))
		}
		for _, m := range ms {
			id := jobID(fieldsOf(m)["job"])
			if _, dup := got[id]; dup {
				t.Fatalf("%s is in two places", id)
			}
			got[id] = st
		}
		// Every pending entry still exists in the stream.
		p, err := env.c.XPendingExt(env.ctx, redisPendingArgs(st)).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, m := range ms {
			ids[m.ID] = true
		}
		for _, x := range p {
			if !ids[x.ID] {
				t.Fatalf("%s: pending entry %s was removed from the stream", st, x.ID)
			}
		}
	}
	exp := map[string]string{}
	for id, where := range want {
		if !strings.HasPrefix(where, "delayed:") {
			exp[id] = where
		}
	}
	if d := cmp.Diff(exp, got); d != "" {
		t.Fatalf("stream contents (-want +got):\n%s", d)
	}
}
