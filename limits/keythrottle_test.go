package limits_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// TestKeyThrottleSteps walks one provider's senders through a stepped clock: a Retry-After
// pauses only its sender for exactly that long, answers without one pause for Base doubling to
// Max, another answer resets the doubling, and a pause only grows.
func TestKeyThrottleSteps(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := limits.NewKeyThrottle(limits.KeyThrottleConfig{Base: time.Second, Max: 4 * time.Second})
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	if w := k.Wait("a", t0); w != 0 {
		t.Fatalf("a fresh sender waits %v", w)
	}
	if until := k.Limited("a", t0, 24*time.Hour, "429"); !until.Equal(at(24 * time.Hour)) {
		t.Errorf("Retry-After 86400 pauses until +%v, want +24h", until.Sub(t0))
	}
	if w := k.Wait("a", at(time.Hour)); w != 23*time.Hour {
		t.Errorf("a waits %v an hour in, want 23h", w)
	}
	if w := k.Wait("b", at(time.Hour)); w != 0 {
		t.Errorf("b waits %v while a is paused; senders pause alone", w)
	}
	// A shorter Retry-After of a request in flight when the pause began does not shorten it.
	k.Limited("a", at(time.Minute), 30*time.Second, "late")
	if w := k.Wait("a", at(time.Hour)); w != 23*time.Hour {
		t.Errorf("a waits %v after a shorter Retry-After, want 23h still", w)
	}
	if w := k.Wait("a", at(24*time.Hour)); w != 0 {
		t.Errorf("a waits %v when its Retry-After ends, want 0", w)
	}

	// Without a Retry-After: 1s, 2s, 4s, 4s; an answer resets the doubling.
	now := t0
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		until := k.Limited("b", now, 0, "429")
		if got := until.Sub(now); got != want {
			t.Errorf("answer %d without Retry-After: paused %v, want %v", i+1, got, want)
		}
		now = until
	}
	k.Answered("b")
	if got := k.Limited("b", now, 0, "429").Sub(now); got != time.Second {
		t.Errorf("after an answer, paused %v, want 1s again", got)
	}

	// A pause from the fleet: only a longer one counts.
	k.Park("c", at(time.Hour), "fleet")
	k.Park("c", at(time.Minute), "shorter")
	want := []limits.KeyState{
		{Key: "a", Until: at(24 * time.Hour), Reason: "429"},
		{Key: "b", Until: now.Add(time.Second), Reason: "429"},
		{Key: "c", Until: at(time.Hour), Reason: "fleet"},
	}
	if d := cmp.Diff(want, k.Paused(now)); d != "" {
		t.Errorf("Paused (-want +got):\n%s", d)
	}
	// Ended pauses are forgotten (b keeps its strike, so it stays tracked but not paused).
	if d := cmp.Diff([]limits.KeyState(nil), k.Paused(at(25*time.Hour))); d != "" {
		t.Errorf("Paused after every pause ended (-want +got):\n%s", d)
	}
}

// TestKeyThrottleBounded: senders past MaxKeys are never paused, so the state stays bounded.
func TestKeyThrottleBounded(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := limits.NewKeyThrottle(limits.KeyThrottleConfig{MaxKeys: 2})
	k.Limited("a", t0, time.Hour, "")
	k.Limited("b", t0, time.Hour, "")
	k.Limited("c", t0, time.Hour, "")
	if w := k.Wait("c", t0); w != 0 {
		t.Errorf("a third sender past MaxKeys 2 waits %v, want 0", w)
	}
	if n := len(k.Paused(t0)); n != 2 {
		t.Errorf("%d senders paused, want 2", n)
	}
}
