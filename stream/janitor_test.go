package stream

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCleanConsumersSafety: a consumer with pending entries is never deleted, however idle
// (its entries would become unclaimable); an idle consumer with nothing pending is; the
// caller never is.
func TestCleanConsumersSafety(t *testing.T) {
	env := newEnv(t)
	self := env.store(t, "self", Options{}, "fcm")
	busy := env.store(t, "busy", Options{}, "fcm")
	lane := self.Keys(0).Lane("fcm")
	e := env.laneEntry(t, busy, "fcm", "j1") // busy now holds a pending lane entry
	for _, c := range []string{"idle-1", "idle-2", "self"} {
		if err := env.c.XGroupCreateConsumer(env.ctx, lane, Group, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Let every consumer's idle time pass 5 ms (polled, not slept on blindly).
	deadline := time.Now().Add(5 * time.Second)
	for {
		cs, err := env.c.XInfoConsumers(env.ctx, lane, Group).Result()
		if err != nil {
			t.Fatal(err)
		}
		min := time.Hour
		for _, c := range cs {
			if c.Idle < min {
				min = c.Idle
			}
		}
		if min > 5*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("consumers never became idle")
		}
		time.Sleep(time.Millisecond)
	}

	// Not idle long enough: nobody goes.
	removed, err := self.CleanConsumers(env.ctx, 0, lane, time.Hour)
	if err != nil || len(removed) != 0 {
		t.Fatalf("CleanConsumers(1h) = %v, %v; want none", removed, err)
	}
	removed, err = self.CleanConsumers(env.ctx, 0, lane, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	if d := cmp.Diff([]string{"idle-1", "idle-2"}, removed); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	cs, _ := env.c.XInfoConsumers(env.ctx, lane, Group).Result()
	var left []string
	for _, c := range cs {
		left = append(left, c.Name)
	}
	sort.Strings(left)
	if d := cmp.Diff([]string{"busy", "self"}, left); d != "" {
		t.Errorf("consumers left (-want +got):\n%s", d)
	}
	// busy's entry is still pending and still busy's to finish.
	if ok, err := busy.AckSent(env.ctx, e, jobID(e.Fields["job"])); !ok || err != nil {
		t.Errorf("busy AckSent = %v, %v", ok, err)
	}
	// The intake's group and a stream without a group are fine too.
	if _, err := self.CleanConsumers(env.ctx, 0, self.Keys(0).Intake, time.Millisecond); err != nil {
		t.Errorf("CleanConsumers(intake): %v", err)
	}
	if r, err := self.CleanConsumers(env.ctx, 0, "wp:{0}:lane:none", time.Millisecond); err != nil || r != nil {
		t.Errorf("CleanConsumers(missing stream) = %v, %v", r, err)
	}
}

// TestCleanConsumerScriptRechecks: the script itself refuses a consumer that has pending
// entries or is the caller, whatever the listing said a moment before.
func TestCleanConsumerScriptRechecks(t *testing.T) {
	env := newEnv(t)
	self := env.store(t, "self", Options{}, "fcm")
	busy := env.store(t, "busy", Options{}, "fcm")
	lane := self.Keys(0).Lane("fcm")
	env.laneEntry(t, busy, "fcm", "j1")
	for _, name := range []string{"busy", "self"} {
		ok, err := self.runBool(env.ctx, cleanConsumerScript, "clean", []string{lane}, Group, name, -1, "self")
		if err != nil || ok {
			t.Errorf("script deleted %s: %v, %v", name, ok, err)
		}
	}
}
