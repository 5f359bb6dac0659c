package stream

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestReclaim(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{Now: func() time.Time { return t0 }}, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	fresh := env.laneEntry(t, w1, "fcm", "fresh")
	idle := env.laneEntry(t, w1, "fcm", "idle")
	often := env.laneEntry(t, w1, "fcm", "often")
	limit := env.laneEntry(t, w1, "fcm", "at-limit")
	gone := env.laneEntry(t, w1, "fcm", "deleted")
	env.age(t, lane, "w1", idle.ID, 10*time.Minute, 1)
	env.age(t, lane, "w1", often.ID, 10*time.Minute, 5)
	env.age(t, lane, "w1", limit.ID, 10*time.Minute, 4)
	env.age(t, lane, "w1", gone.ID, 10*time.Minute, 1)
	// An entry deleted while pending (by hand, or by an older release) must not linger in the
	// pending list.
	env.c.XDel(env.ctx, lane, gone.ID)

	claimed, dead, err := w2.Reclaim(env.ctx, 0, lane, 5*time.Minute, 100, 5, nil)
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if dead != (Dead{TooManyDeliveries: 1}) {
		t.Errorf("dead = %+v, want 1 for too many deliveries", dead)
	}
	var ids []string
	for _, c := range claimed {
		ids = append(ids, c.ID)
		if c.Stream != lane || c.Shard != 0 || c.Fields["provider"] != "fcm" || c.Fields["job"] == "" {
			t.Errorf("claimed entry %+v", c)
		}
	}
	if d := cmp.Diff([]string{idle.ID, limit.ID}, ids); d != "" {
		t.Errorf("claimed ids (-want +got):\n%s", d)
	}
	// Ownership moved: w1 can no longer finish what w2 claimed; w2 can.
	if ok, _ := w1.Finish(env.ctx, idle, Result{ID: "idle", Code: "ACCEPTED"}); ok {
		t.Error("w1 finished an entry w2 reclaimed")
	}
	if ok, err := w2.Finish(env.ctx, claimed[0], Result{ID: "idle", Code: "ACCEPTED"}); !ok || err != nil {
		t.Errorf("w2 Finish = %v, %v", ok, err)
	}
	// The fresh entry stays with w1.
	if ok, err := w1.AckSent(env.ctx, fresh, jobID(fresh.Fields["job"])); !ok || err != nil {
		t.Errorf("w1 AckSent(fresh) = %v, %v", ok, err)
	}
	d := env.entries(t, w1.Keys(0).Dead)
	if len(d) != 1 {
		t.Fatalf("dead stream has %d entries, want 1", len(d))
	}
	want := map[string]string{"id": "often", "code": CodeTooManyDeliveries, "reason": "delivered 5 times without finishing",
		"from": lane, "entry": often.ID, "provider": "fcm", "attempt": "0", "at": "1748779200000", "job": often.Fields["job"]}
	if diff := cmp.Diff(want, fieldsOf(d[0])); diff != "" {
		t.Errorf("dead record (-want +got):\n%s", diff)
	}
	// Left in the group: only at-limit, now w2's.
	p, err := env.c.XPendingExt(env.ctx, redisPendingArgs(lane)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].ID != limit.ID || p[0].Consumer != "w2" || p[0].RetryCount != 5 {
		t.Errorf("pending after reclaim = %+v", p)
	}
	if n := env.xlen(t, lane); n != 1 {
		t.Errorf("lane XLEN = %d, want 1 (at-limit only)", n)
	}
	// Nothing idle is left to claim.
	claimed, dead, err = w2.Reclaim(env.ctx, 0, lane, 5*time.Minute, 100, 5, nil)
	if err != nil || len(claimed) != 0 || dead.Total() != 0 {
		t.Errorf("second Reclaim = %d claimed, %+v dead, %v; want none", len(claimed), dead, err)
	}
}

func TestReclaimIntakeNoLimit(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	env.enqueue(t, w1, validJob("a"), "{not json")
	in := env.readIntake(t, w1, 2)
	for _, e := range in {
		env.age(t, e.Stream, "w1", e.ID, time.Hour, 50)
	}
	claimed, dead, err := w2.Reclaim(env.ctx, 0, w1.Keys(0).Intake, time.Minute, 100, 0, nil)
	if err != nil || dead.Total() != 0 || len(claimed) != 2 {
		t.Fatalf("Reclaim without a limit = %d claimed, %+v dead, %v; want 2, 0", len(claimed), dead, err)
	}
	if claimed[1].Fields["job"] != "{not json" {
		t.Errorf("claimed fields = %v", claimed[1].Fields)
	}
	// With a limit, an intake entry that is not JSON is dead-lettered without an id.
	env.age(t, claimed[1].Stream, "w2", claimed[1].ID, time.Hour, 50)
	_, dead, err = w1.Reclaim(env.ctx, 0, w1.Keys(0).Intake, time.Minute, 100, 5, nil)
	if err != nil || dead != (Dead{TooManyDeliveries: 1}) {
		t.Fatalf("Reclaim = %+v dead, %v; want 1", dead, err)
	}
	f := fieldsOf(env.entries(t, w1.Keys(0).Dead)[0])
	if f["id"] != "" || f["job"] != "{not json" || f["provider"] != "" || f["reason"] != "delivered 50 times without finishing" {
		t.Errorf("dead record = %v", f)
	}
}

// TestReclaimLooksPastBusyEntries: XAUTOCLAIM inspects at most 10 x COUNT pending entries per
// call, so with COUNT 1 and a dozen busy (not idle) entries at the front of the pending list, a
// single call would claim nothing. Reclaim must follow the cursor to the idle entry behind them.
func TestReclaimLooksPastBusyEntries(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	for i := range 25 {
		env.laneEntry(t, w1, "fcm", "busy-"+itoa(int64(i)))
	}
	idle := env.laneEntry(t, w1, "fcm", "idle")
	env.age(t, lane, "w1", idle.ID, 10*time.Minute, 1)
	claimed, dead, err := w2.Reclaim(env.ctx, 0, lane, 5*time.Minute, 1, 5, nil)
	if err != nil || dead.Total() != 0 {
		t.Fatalf("Reclaim: %v, %+v dead", err, dead)
	}
	if len(claimed) != 1 || claimed[0].ID != idle.ID {
		t.Fatalf("claimed %+v, want the one idle entry %s behind 25 busy ones", claimed, idle.ID)
	}
}

// TestReclaimRefreshesTheEntriesItsConsumerHolds: an entry its consumer still holds (passed as
// held) has its idle time reset with no delivery counted, and is neither claimed nor
// dead-lettered however often it was delivered; the same entry not held is claimed. A held id
// pending for another consumer is left to it.
func TestReclaimRefreshesTheEntriesItsConsumerHolds(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{Now: func() time.Time { return t0 }}, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	held := env.laneEntry(t, w1, "fcm", "held")
	lost := env.laneEntry(t, w1, "fcm", "lost")
	others := env.laneEntry(t, w1, "fcm", "others")
	env.age(t, lane, "w1", held.ID, 10*time.Minute, 5)
	env.age(t, lane, "w1", lost.ID, 10*time.Minute, 1)
	env.age(t, lane, "w1", others.ID, time.Second, 1)

	claimed, dead, err := w1.Reclaim(env.ctx, 0, lane, 5*time.Minute, 100, 5, []string{held.ID})
	if err != nil {
		t.Fatalf("Reclaim: %v", err)
	}
	if len(claimed) != 1 || claimed[0].ID != lost.ID || dead != (Dead{}) {
		t.Fatalf("Reclaim with %s held: claimed %v, dead %+v; want only %s, none dead", held.ID, claimed, dead, lost.ID)
	}
	// w2 names w1's entry as held: nothing of w1's changes.
	if _, _, err := w2.Reclaim(env.ctx, 0, lane, 5*time.Minute, 100, 5, []string{others.ID}, "w1"); err != nil {
		t.Fatalf("w2 Reclaim: %v", err)
	}
	p, err := env.c.XPendingExt(env.ctx, &redis.XPendingExtArgs{Stream: lane, Group: Group, Start: "-", End: "+", Count: 10}).Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]redis.XPendingExt{}
	for _, x := range p {
		got[x.ID] = x
	}
	if x := got[held.ID]; x.Consumer != "w1" || x.RetryCount != 5 || x.Idle > time.Minute {
		t.Errorf("held entry: %+v; want w1's, 5 deliveries, its idle time reset", x)
	}
	if x := got[lost.ID]; x.Consumer != "w1" || x.RetryCount != 2 {
		t.Errorf("lost entry: %+v; want w1's, claimed again (2 deliveries)", x)
	}
	if x := got[others.ID]; x.Consumer != "w1" || x.RetryCount != 1 {
		t.Errorf("w1's entry w2 named as held: %+v; want w1's, 1 delivery", x)
	}
}
