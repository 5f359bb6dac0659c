package dispatch

import (
	"math"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func TestBackoffNext(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	std := Backoff{Base: 5 * time.Second, Cap: 10 * time.Minute, MaxRetries: 8}
	long := 30 * 24 * time.Hour // a TTL that never binds
	tests := []struct {
		name       string
		b          Backoff
		attempt    int
		retryAfter time.Duration
		remaining  time.Duration
		rnd        float64
		wantDelay  time.Duration // due - now, when the verdict is retryLater
		want       verdict
	}{
		{name: "first retry, half the base", b: std, rnd: 0.5, remaining: long, wantDelay: 2500 * time.Millisecond, want: retryLater},
		{name: "full jitter may retry at once", b: std, rnd: 0, remaining: long, wantDelay: 0, want: retryLater},
		{name: "top of the first ceiling", b: std, rnd: 0.999, remaining: long, wantDelay: 4995 * time.Millisecond, want: retryLater},
		{name: "ceiling doubles per attempt", b: std, attempt: 3, rnd: 0.5, remaining: long, wantDelay: 20 * time.Second, want: retryLater},
		{name: "ceiling capped at 10 min", b: std, attempt: 7, rnd: 0.999, remaining: long, wantDelay: 599400 * time.Millisecond, want: retryLater},
		{name: "cap halves too", b: std, attempt: 7, rnd: 0.5, remaining: long, wantDelay: 5 * time.Minute, want: retryLater},
		{name: "Retry-After longer than the backoff wins", b: std, rnd: 0.5, retryAfter: 2 * time.Minute, remaining: long, wantDelay: 2 * time.Minute, want: retryLater},
		{name: "Retry-After shorter than the backoff loses", b: std, attempt: 3, rnd: 0.5, retryAfter: time.Second, remaining: long, wantDelay: 20 * time.Second, want: retryLater},
		{name: "Retry-After beyond the cap is honoured", b: std, attempt: 7, rnd: 0.5, retryAfter: 20 * time.Minute, remaining: long, wantDelay: 20 * time.Minute, want: retryLater},
		{name: "eighth retry is allowed", b: std, attempt: 7, rnd: 0.5, remaining: long, wantDelay: 5 * time.Minute, want: retryLater},
		{name: "ninth is not: 8-retry limit", b: std, attempt: 8, rnd: 0.5, remaining: long, want: retriesExhausted},
		{name: "exhausted even when the TTL also ran out", b: std, attempt: 8, rnd: 0.5, remaining: 0, want: retriesExhausted},
		{name: "due after the TTL ends is expired", b: std, rnd: 0.5, remaining: 2 * time.Second, want: retryExpired},
		{name: "due exactly when the TTL ends is expired", b: std, rnd: 0.5, remaining: 2500 * time.Millisecond, want: retryExpired},
		{name: "due just inside the TTL retries", b: std, rnd: 0.5, remaining: 2501 * time.Millisecond, wantDelay: 2500 * time.Millisecond, want: retryLater},
		{name: "Retry-After past the TTL is expired", b: std, rnd: 0.5, retryAfter: 2 * time.Minute, remaining: time.Minute, want: retryExpired},
		{name: "TTL already over", b: std, rnd: 0, remaining: -time.Second, want: retryExpired},
		{name: "TTL 0 is never retried", b: std, rnd: 0, remaining: 0, want: retryExpired},
		{name: "configured limit", b: Backoff{Base: time.Second, Cap: 4 * time.Second, MaxRetries: 2}, attempt: 2, rnd: 0.5, remaining: long, want: retriesExhausted},
		{name: "configured cap", b: Backoff{Base: time.Second, Cap: 4 * time.Second, MaxRetries: 9}, attempt: 5, rnd: 0.5, remaining: long, wantDelay: 2 * time.Second, want: retryLater},
		{name: "huge attempt does not overflow", b: Backoff{Base: time.Second, Cap: time.Hour, MaxRetries: math.MaxInt}, attempt: 10_000, rnd: 0.5, remaining: long, wantDelay: 30 * time.Minute, want: retryLater},
		{name: "NaN draw counts as 0", b: std, rnd: math.NaN(), remaining: long, wantDelay: 0, want: retryLater},
		{name: "draw above 1 counts as 1", b: std, rnd: 7, remaining: long, wantDelay: 5 * time.Second, want: retryLater},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			due, v := tc.b.next(now, tc.attempt, tc.retryAfter, tc.remaining, tc.rnd)
			if v != tc.want {
				t.Fatalf("verdict = %v, want %v", v, tc.want)
			}
			if v != retryLater {
				if !due.IsZero() {
					t.Errorf("due = %v, want zero for %v", due, v)
				}
				return
			}
			if got := due.Sub(now); got != tc.wantDelay {
				t.Errorf("due in %v, want %v", got, tc.wantDelay)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	if _, err := (Config{}).withDefaults(); err == nil {
		t.Fatal("withDefaults accepted a Config without a Store")
	}
	e := newEnv(t, envOptions{})
	cfg := Config{Store: e.store, Sender: e.sender, Registry: e.reg, Keys: map[string]*vapid.Key{"default": e.key}}
	got, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	// 0 is none for what may be off (the retries, the caps, the gather); the rest take their
	// defaults.
	want := Backoff{Base: 5 * time.Second, Cap: 10 * time.Minute}
	if got.Backoff != want || got.VisibilityTimeout != time.Minute || got.MaxDeliveries != 5 ||
		got.Grace != 25*time.Second || got.Block != time.Second || got.IntakeBatch != 100 ||
		got.PromoteEvery != 250*time.Millisecond || got.ReclaimEvery != 5*time.Second ||
		got.JanitorEvery != time.Minute || got.JanitorIdle != 10*time.Minute || got.StartupTimeout != 2*time.Minute ||
		got.MaxDelayed != 0 || got.MaxPerRecipient != 0 || got.LaneGather != 0 ||
		got.Now == nil || got.Rand == nil || got.Logger == nil {
		t.Errorf("defaults not applied: %+v", got)
	}
	// A negative cap, count of retries or gather is taken as 0: none.
	neg := cfg
	neg.Backoff.MaxRetries, neg.MaxDelayed, neg.MaxPerRecipient, neg.LaneGather = -1, -1, -1, -time.Second
	if got, err := neg.withDefaults(); err != nil || got.Backoff.MaxRetries != 0 || got.MaxDelayed != 0 || got.MaxPerRecipient != 0 || got.LaneGather != 0 {
		t.Errorf("negatives: %+v, %v; want every one 0", got, err)
	}
	cfg.Keys = map[string]*vapid.Key{"default": nil}
	if _, err := cfg.withDefaults(); err == nil {
		t.Error("withDefaults accepted a nil key")
	}
}
