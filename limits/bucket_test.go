package limits_test

import (
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// bucketStep is one call on a Bucket at t0+at, then the rate in force it should leave.
type bucketStep struct {
	at   time.Duration
	op   string // "throttle", "recover", "setrate", "configure"
	arg  float64
	rate float64
}

// unlimited is what Rate reports for a bucket without a limit.
const unlimited = float64(rate.Inf)

func TestBucketAIMD(t *testing.T) {
	s := time.Second
	tests := []struct {
		name  string
		rate  float64 // configured at t0
		steps []bucketStep
	}{
		{"throttle halves down to configured/64", 100, []bucketStep{
			{0, "throttle", 0, 50},
			{0, "throttle", 0, 25},
			{0, "throttle", 0, 12.5},
			{0, "throttle", 0, 6.25},
			{0, "throttle", 0, 3.125},
			{0, "throttle", 0, 1.5625},
			{0, "throttle", 0, 1.5625},
		}},
		{"recover waits 1s after a throttle, then climbs by configured/10 a second", 100, []bucketStep{
			{0, "throttle", 0, 50},
			{s / 2, "recover", 0, 50},
			{s - 1, "recover", 0, 50},
			{s, "recover", 0, 60}, // the quiet second counts: the climb is from the throttle
			{2 * s, "recover", 0, 70},
			{2*s + s/2, "recover", 0, 75},
			{5 * s, "recover", 0, 100},
			{6 * s, "recover", 0, 100},
		}},
		{"recover never goes above the configured rate", 100, []bucketStep{
			{0, "throttle", 0, 50},
			{100 * s, "recover", 0, 100},
		}},
		{"a new throttle restarts the quiet second", 100, []bucketStep{
			{0, "throttle", 0, 50},
			{2 * s, "recover", 0, 70},
			{3 * s, "throttle", 0, 35},
			{3*s + s/2, "recover", 0, 35},
			{4 * s, "recover", 0, 45},
		}},
		{"time before a throttle is not recovery time", 100, []bucketStep{
			{0, "recover", 0, 100},
			{10 * s, "throttle", 0, 50},
			{11 * s, "recover", 0, 60},
		}},
		{"recover climbs back from SetRate, counting from it", 100, []bucketStep{
			{0, "setrate", 30, 30},
			{s, "recover", 0, 40},
			{3 * s, "recover", 0, 60},
		}},
		{"an unthrottled bucket takes a new configured rate", 100, []bucketStep{
			{0, "configure", 40, 40},
			{0, "throttle", 0, 20},
			{0, "throttle", 0, 10},
			{0, "throttle", 0, 5},
			{0, "throttle", 0, 2.5},
			{0, "throttle", 0, 1.25},
			{0, "throttle", 0, 0.625}, // 40/64
		}},
		{"configure keeps a throttled bucket throttled by the same fraction", 100, []bucketStep{
			{0, "throttle", 0, 50},
			{0, "configure", 40, 20}, // half of the new 40
			{s, "recover", 0, 24},    // climbs by the new configured/10
			{10 * s, "recover", 0, 40},
			{10 * s, "configure", 80, 80},
		}},
		{"configure keeps the new floor", 100, []bucketStep{
			{0, "throttle", 0, 50},
			{0, "setrate", 1, 1},
			{0, "configure", 6400, 100}, // 1% of 6400 is 64, but the floor is 6400/64
		}},
		{"an unlimited bucket stays unlimited", 0, []bucketStep{
			{0, "throttle", 0, unlimited},
			{s, "recover", 0, unlimited},
			{s, "configure", 100, 100},
			{s, "throttle", 0, 50},
			{s, "configure", 0, unlimited},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := limits.NewBucket(tc.rate, 10)
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				switch st.op {
				case "throttle":
					b.Throttle(now)
				case "recover":
					b.Recover(now)
				case "setrate":
					b.SetRate(now, st.arg)
				case "configure":
					b.Configure(now, st.arg, 10)
				default:
					t.Fatalf("step %d: unknown op %q", i, st.op)
				}
				if got := b.Rate(); math.Abs(got-st.rate) > 1e-9 && got != st.rate {
					t.Fatalf("step %d (%s at %v): Rate = %v, want %v", i, st.op, st.at, got, st.rate)
				}
			}
		})
	}
}

// The rate Throttle sets is the one the limiter enforces: at 100/s a burst of 1 refills in
// 10ms, at the throttled 50/s in 20ms.
func TestBucketThrottleSlowsTokens(t *testing.T) {
	b := limits.NewBucket(100, 1)
	if !b.Allow(t0) {
		t.Fatal("first token refused")
	}
	b.Throttle(t0)
	if b.Allow(t0.Add(10 * time.Millisecond)) {
		t.Fatal("a token after 10ms at the throttled 50/s")
	}
	if !b.Allow(t0.Add(20 * time.Millisecond)) {
		t.Fatal("no token after 20ms at 50/s")
	}
}

// TestConfigureRaisingTheRateWakesWaiters: Raised is closed when Configure raises the rate in
// force, and a reservation made again then is due at the new rate; a lower rate, or the same
// one, closes nothing.
func TestConfigureRaisingTheRateWakesWaiters(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := limits.NewBucket(0.1, 1)
	if !b.Allow(now) {
		t.Fatal("the first token was refused")
	}
	raised := b.Raised()
	d, r := b.Delay(now)
	if d < 9*time.Second {
		t.Fatalf("delay at 0.1/s = %v, want about 10s", d)
	}
	b.Configure(now, 0.05, 1)
	b.Configure(now, 0.05, 1)
	select {
	case <-raised:
		t.Fatal("Raised closed by a lower rate")
	default:
	}
	b.Configure(now, 100, 1)
	select {
	case <-raised:
	default:
		t.Fatal("Raised not closed by a raise to 100/s")
	}
	r.CancelAt(now)
	if d, _ := b.Delay(now); d > 50*time.Millisecond {
		t.Errorf("delay reserved again at 100/s = %v, want at most 50ms", d)
	}
	select {
	case <-b.Raised():
		t.Error("the channel after a raise is already closed")
	default:
	}
}
