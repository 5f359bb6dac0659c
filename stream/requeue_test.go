package stream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// TestRequeue: the idle entries of a consumer that is gone go back to the end of their lane as
// new entries, with their fields and their deliveries so far, and the old ones are acknowledged
// and deleted; an entry delivered as often as allowed goes to the dead stream instead; an entry
// not idle long enough stays with its consumer; one deleted while pending leaves the pending
// list.
func TestRequeue(t *testing.T) {
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

	got, err := w2.Requeue(env.ctx, 0, lane, Requeue{MinIdle: 5 * time.Minute, Count: 100, MaxDeliveries: 5})
	if err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	if got != (Requeued{Entries: 2, TooManyDeliveries: 1}) {
		t.Errorf("Requeue = %+v, want 2 handed back and 1 dead for too many deliveries", got)
	}
	// Handed back: new entries at the lane's end, with the deliveries they had; the old ones
	// are gone, so w1 can no longer finish them.
	if ok, _ := w1.Finish(env.ctx, idle, Result{ID: "idle", Code: "ACCEPTED"}); ok {
		t.Error("w1 finished an entry that was handed back")
	}
	read := env.readLane(t, w2, "fcm", 2)
	for i, want := range []struct{ id, deliveries string }{{"idle", "1"}, {"at-limit", "4"}} {
		e := read[i]
		if jobID(e.Fields["job"]) != want.id || e.Fields["deliveries"] != want.deliveries || !e.Redelivered() ||
			e.Fields["provider"] != "fcm" || e.Fields["attempt"] != "0" {
			t.Errorf("handed-back entry %d = %v; want %s with deliveries %s", i, e.Fields, want.id, want.deliveries)
		}
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
	// The deliveries carry over: at-limit, read once more and left idle, has had 5.
	env.age(t, lane, "w2", read[1].ID, 10*time.Minute, 1)
	if got, err := w1.Requeue(env.ctx, 0, lane, Requeue{MinIdle: 5 * time.Minute, Count: 100, MaxDeliveries: 5, Alive: []string{"w1"}}); err != nil ||
		got != (Requeued{TooManyDeliveries: 1}) {
		t.Errorf("second Requeue = %+v, %v; want at-limit dead after its fifth delivery", got, err)
	}
	if f := fieldsOf(env.entries(t, w1.Keys(0).Dead)[1]); f["id"] != "at-limit" || f["reason"] != "delivered 5 times without finishing" {
		t.Errorf("second dead record = %v", f)
	}
}

// TestRequeueIntake: intake entries are handed back as they are (any job, valid or not, for
// the intake to judge); with a limit, one delivered too often is dead-lettered without an id
// when it has none.
func TestRequeueIntake(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	env.enqueue(t, w1, validJob("a"), "{not json")
	in := env.readIntake(t, w1, 2)
	for _, e := range in {
		env.age(t, e.Stream, "w1", e.ID, time.Hour, 50)
	}
	back := env.takeOver(t, w2, w1.Keys(0).Intake, time.Minute, 0)
	if len(back) != 2 || back[1].Fields["job"] != "{not json" || back[1].Fields["deliveries"] != "50" {
		t.Fatalf("handed back without a limit: %v; want both, with their 50 deliveries", back)
	}
	// The intake reads a handed-back entry like any other.
	env.age(t, back[0].Stream, "w2", back[0].ID, time.Hour, 1)
	env.age(t, back[1].Stream, "w2", back[1].ID, time.Hour, 1)
	if got, err := w1.Requeue(env.ctx, 0, w1.Keys(0).Intake, Requeue{MinIdle: time.Minute, Count: 100, MaxDeliveries: 5, Alive: []string{"w1"}}); err != nil ||
		got != (Requeued{TooManyDeliveries: 2}) {
		t.Fatalf("Requeue with a limit = %+v, %v; want 2 dead", got, err)
	}
	f := fieldsOf(env.entries(t, w1.Keys(0).Dead)[1])
	if f["id"] != "" || f["job"] != "{not json" || f["provider"] != "" || f["reason"] != "delivered 51 times without finishing" {
		t.Errorf("dead record = %v", f)
	}
}

// TestRequeueLooksPastBusyEntries: with a dozen busy (not idle) entries at the front of the
// pending list and a count of 1, Requeue still finds the idle entry behind them.
func TestRequeueLooksPastBusyEntries(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	for i := range 25 {
		env.laneEntry(t, w1, "fcm", "busy-"+itoa(int64(i)))
	}
	idle := env.laneEntry(t, w1, "fcm", "idle")
	env.age(t, lane, "w1", idle.ID, 10*time.Minute, 1)
	got, err := w2.Requeue(env.ctx, 0, lane, Requeue{MinIdle: 5 * time.Minute, Count: 1, MaxDeliveries: 5})
	if err != nil || got != (Requeued{Entries: 1}) {
		t.Fatalf("Requeue = %+v, %v; want the one idle entry behind 25 busy ones", got, err)
	}
	if last := env.entries(t, lane); jobID(last[len(last)-1].Values["job"].(string)) != "idle" {
		t.Errorf("the lane's last entry is %v, want idle handed back", last[len(last)-1].Values)
	}
}

// TestRequeueSparesLiveOwners: an idle entry whose owner is alive is that owner's, however long
// it idles; it is handed back once the owner is not in the alive list; and Only hands back a
// named consumer's entries whatever their idle time (a worker's own at its start).
func TestRequeueSparesLiveOwners(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	w2 := env.store(t, "w2", Options{}, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	e := env.laneEntry(t, w1, "fcm", "j1")
	env.age(t, lane, "w1", e.ID, time.Hour, 1)
	if got, err := w2.Requeue(env.ctx, 0, lane, Requeue{MinIdle: time.Minute, Count: 10, Alive: []string{"w1", "w2"}}); err != nil || got.Entries != 0 {
		t.Fatalf("Requeue with w1 alive = %+v, %v; want none", got, err)
	}
	if got, err := w2.Requeue(env.ctx, 0, lane, Requeue{MinIdle: time.Minute, Count: 10, Alive: []string{"w2"}}); err != nil || got.Entries != 1 {
		t.Fatalf("Requeue with w1 gone = %+v, %v; want 1", got, err)
	}
	if ok, err := w1.Owns(env.ctx, e); ok || err != nil {
		t.Errorf("after the hand-back w1 owns the old entry = %v, %v", ok, err)
	}
	fresh := env.laneEntry(t, w1, "fcm", "j2") // read by w1 just now
	if got, err := w2.Requeue(env.ctx, 0, lane, Requeue{Count: 10, Only: "w1"}); err != nil || got.Entries != 1 {
		t.Fatalf("Requeue of w1's own = %+v, %v; want its fresh entry", got, err)
	}
	if ok, _ := w1.Owns(env.ctx, fresh); ok {
		t.Error("w1 still owns the entry handed back")
	}
}

// TestRequeueChecksIntakeEntries: an intake entry that a dead consumer read, and that breaks
// the entry rules, is dead-lettered by the hand-back, never copied; a lane entry dead-lettered
// for too many deliveries carries at most job.MaxEntryBytes of its job (a job the gateway took,
// kept for replay) and leaves the jobs index.
func TestRequeueChecksIntakeEntries(t *testing.T) {
	env := newEnv(t)
	ghost := env.store(t, "ghost", Options{}, "fcm")
	w := env.store(t, "w", Options{}, "fcm")
	k := w.Keys(0)
	big := strings.Repeat("y", 1<<20)
	if err := env.c.XAdd(env.ctx, &redis.XAddArgs{Stream: k.Intake, Values: []any{"job", big}}).Err(); err != nil {
		t.Fatal(err)
	}
	// The ghost read it with a plain XREADGROUP (an older worker, or one that died mid-read).
	if err := env.c.XReadGroup(env.ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "ghost", Streams: []string{k.Intake, ">"}, Count: 1}).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := w.Requeue(env.ctx, 0, k.Intake, Requeue{Count: 10, MaxDeliveries: 5})
	if err != nil || got != (Requeued{Invalid: 1}) {
		t.Fatalf("Requeue = %+v, %v; want 1 invalid", got, err)
	}
	if n := env.xlen(t, k.Intake); n != 0 {
		t.Errorf("the intake holds %d entries; the oversized one must not be copied", n)
	}
	rec := fieldsOf(env.entries(t, k.Dead)[0])
	if rec["reason"] != fmt.Sprintf("entry is %d bytes; at most %d", len(big), job.MaxEntryBytes) || len(rec["job"]) != MaxInvalidJobBytes ||
		rec["job_bytes"] != itoa(int64(len(big))) || rec["note"] == "" {
		t.Errorf("dead record: reason %q, job of %d bytes, job_bytes %q, note %q; want the first %d bytes, the size and a note",
			rec["reason"], len(rec["job"]), rec["job_bytes"], rec["note"], MaxInvalidJobBytes)
	}

	e := env.laneEntry(t, ghost, "fcm", "too-many")
	env.c.HSet(env.ctx, k.Jobs, "too-many", "fcm")
	env.age(t, e.Stream, "ghost", e.ID, time.Hour, 9)
	if got, err := w.Requeue(env.ctx, 0, e.Stream, Requeue{Count: 10, MaxDeliveries: 5}); err != nil || got != (Requeued{TooManyDeliveries: 1}) {
		t.Fatalf("Requeue of the lane = %+v, %v; want 1 dead", got, err)
	}
	if rec := fieldsOf(env.entries(t, k.Dead)[1]); rec["id"] != "too-many" || rec["job"] != e.Fields["job"] {
		t.Errorf("dead record %v; want the whole job", rec)
	}
	if held, _ := env.c.HExists(env.ctx, k.Jobs, "too-many").Result(); held {
		t.Error("the dead-lettered job is still in the jobs index")
	}
}

// TestRequeueOwnLostEntries: a consumer's own idle entries go back, but for those it says it is
// working on: an entry read by a call whose reply never reached it is handed back; a send slower
// than the visibility timeout keeps its entry.
func TestRequeueOwnLostEntries(t *testing.T) {
	env, w1 := newStore(t, "fcm")
	lane := w1.Keys(0).Lane("fcm")
	lost := env.laneEntry(t, w1, "fcm", "lost")
	slow := env.laneEntry(t, w1, "fcm", "slow")
	env.age(t, lane, "w1", lost.ID, 10*time.Minute, 1)
	env.age(t, lane, "w1", slow.ID, 10*time.Minute, 1)
	got, err := w1.Requeue(env.ctx, 0, lane, Requeue{MinIdle: time.Minute, Count: 10, Only: "w1", Except: []string{slow.ID}})
	if err != nil || got != (Requeued{Entries: 1}) {
		t.Fatalf("Requeue = %+v, %v; want the lost entry alone", got, err)
	}
	if ok, _ := w1.Owns(env.ctx, slow); !ok {
		t.Error("the slow send's entry was taken")
	}
	if ok, _ := w1.Owns(env.ctx, lost); ok {
		t.Error("the lost entry is still pending")
	}
}
