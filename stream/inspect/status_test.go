package inspect

import (
	"slices"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestBulkLanesInTheOperatorsViews: a provider with a job in each of its lanes, transactional
// and bulk, is one provider to AllLanes, and Counts counts each lane apart.
func TestBulkLanesInTheOperatorsViews(t *testing.T) {
	env, s := newStore(t, "fcm")
	env.enqueue(t, s, validJob("tx"), validJob("bulk"))
	for _, in := range env.readIntake(t, s, 2) {
		class := job.ClassTransactional
		if jobID(in.Fields["job"]) == "bulk" {
			class = job.ClassBulk
		}
		if v, err := s.ToLane(env.ctx, in, "fcm", class, jobID(in.Fields["job"]), in.Fields["job"], t0.UnixMilli()); v != stream.Moved || err != nil {
			t.Fatalf("ToLane %s = %v, %v", class, v, err)
		}
	}
	all, err := inspectorOf(s).AllLanes(env.ctx)
	if err != nil || !slices.Equal(all[0], []string{"fcm"}) {
		t.Errorf("AllLanes = %v, %v; want fcm once", all, err)
	}
	counts, err := inspectorOf(s).Counts(env.ctx)
	if err != nil || counts["lane:fcm"] != 1 || counts["lane:fcm:bulk"] != 1 {
		t.Errorf("Counts = %v, %v; want one entry in each lane", counts, err)
	}
}
