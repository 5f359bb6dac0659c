package limits_test

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// t0 is the instant the stepped clocks of these tests start at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestBucketSteppedClock(t *testing.T) {
	b := limits.NewBucket(10, 2) // 10/s, burst 2
	tests := []struct {
		name string
		at   time.Duration
		want bool
	}{
		{"burst 1", 0, true},
		{"burst 2", 0, true},
		{"empty", 0, false},
		{"too early for a token", 50 * time.Millisecond, false},
		{"one token after 100ms", 100 * time.Millisecond, true},
		{"spent again", 100 * time.Millisecond, false},
	}
	for _, tc := range tests {
		if got := b.Allow(t0.Add(tc.at)); got != tc.want {
			t.Fatalf("%s: Allow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBucketSetRateNeverExceedsConfigured(t *testing.T) {
	now := t0
	b := limits.NewBucket(100, 10)
	b.SetRate(now, 25)
	if got := b.Rate(); got != 25 {
		t.Fatalf("Rate after SetRate(25) = %v, want 25", got)
	}
	b.SetRate(now, 1000)
	if got := b.Rate(); got != 100 {
		t.Fatalf("Rate after SetRate(1000) = %v, want the configured 100", got)
	}
	b.Configure(now, 40, 5)
	if got, cfg := b.Rate(), b.Configured(); got != 40 || cfg != 40 {
		t.Fatalf("after Configure(40): Rate %v Configured %v, want 40 and 40", got, cfg)
	}
	d, r := b.Delay(now)
	if d != 0 {
		t.Fatalf("Delay with tokens in the bucket = %v, want 0", d)
	}
	r.Cancel()
}

func TestBucketUnlimited(t *testing.T) {
	now := t0
	b := limits.NewBucket(0, 1)
	for i := range 1000 {
		if !b.Allow(now) {
			t.Fatalf("unlimited bucket refused request %d", i)
		}
	}
}
