package limits_test

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// TestTokensTakeAndReturn: a lane takes what the bucket holds, up to what it asks and less
// what it keeps for others, gives back exactly what it did not use, and the bucket refills at
// its rate up to its burst, on the clock the caller steps.
func TestTokensTakeAndReturn(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	b := limits.NewTokens(10, 5) // 10 a second, 5 at most
	if got := b.Take(t0, 8, 0); got != 5 {
		t.Fatalf("Take(8) of a full bucket of 5 = %d, want 5", got)
	}
	if got := b.Take(t0, 1, 0); got != 0 {
		t.Fatalf("Take(1) of an empty bucket = %d, want 0", got)
	}
	if got := b.Until(t0, 1); got != 100*time.Millisecond {
		t.Fatalf("Until one token = %v, want 100ms", got)
	}
	b.Return(t0, 2)
	if got := b.Take(at(250*time.Millisecond), 10, 1); got != 3 {
		// 2 given back and 2.5 earned: 4 whole tokens, one of them kept.
		t.Fatalf("Take(10, keep 1) = %d, want 3", got)
	}
	if got := b.Take(at(10*time.Second), 10, 0); got != 5 {
		t.Fatalf("Take after a long pause = %d, want the burst, 5", got)
	}
	b.Return(at(10*time.Second), 100)
	if got := b.Take(at(10*time.Second), 10, 0); got != 5 {
		t.Fatalf("Take after giving back more than the burst = %d, want 5", got)
	}
}

// TestTokensReserve: a reservation of an empty bucket is due when the rate earns it, and the
// debt it leaves is paid before the next, so a caller that wakes late loses nothing of the rate.
func TestTokensReserve(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := limits.NewTokens(20, 1) // a token every 50 ms, one at most
	if got := b.Reserve(t0); !got.Equal(t0) {
		t.Fatalf("Reserve of a full bucket is due at %v, want now", got)
	}
	due := b.Reserve(t0)
	if want := t0.Add(50 * time.Millisecond); !due.Equal(want) {
		t.Fatalf("Reserve of an empty bucket is due at %v, want %v", due, want)
	}
	// The caller wakes 7 ms late: the next token is due 50 ms after the last one was, not
	// after the wake-up.
	if got, want := b.Reserve(due.Add(7*time.Millisecond)), t0.Add(100*time.Millisecond); !got.Equal(want) {
		t.Fatalf("the next reservation is due at %v, want %v", got, want)
	}
	b.Return(t0.Add(60*time.Millisecond), 1) // the last one was not used
	if got, want := b.Reserve(t0.Add(60*time.Millisecond)), t0.Add(100*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after a return the next is due at %v, want %v", got, want)
	}
}

// TestTokensConfigure: a raise wakes whoever waits at the old rate; no limit gives what is
// asked.
func TestTokensConfigure(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := limits.NewTokens(1, 1)
	b.Take(t0, 1, 0)
	raised := b.Raised()
	b.Configure(t0, 0.5, 1)
	select {
	case <-raised:
		t.Fatal("Raised closed by a lowered rate")
	default:
	}
	b.Configure(t0, 100, 10)
	select {
	case <-raised:
	default:
		t.Fatal("Raised not closed by a raised rate")
	}
	if got := b.Until(t0, 1); got != 10*time.Millisecond {
		t.Fatalf("Until at the raised rate = %v, want 10ms", got)
	}
	free := limits.NewTokens(0, 1)
	if got := free.Take(t0, 1000, 1); got != 1000 || free.Until(t0, 5) != 0 {
		t.Fatalf("an unlimited bucket gave %d of 1000", got)
	}
}
