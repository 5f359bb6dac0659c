package limits_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// Expire counts a host out once its pause and its failures are over, with no job for it since,
// and keeps what still holds: a pause not over yet, a breaker waiting for its probe.
func TestHostLimitsExpire(t *testing.T) {
	h := limits.NewHostLimits(limits.HostLimitsConfig{
		Breaker: limits.BreakerConfig{FailureRatio: 1, MinSamples: 1, Window: 10 * time.Second, Cooldown: time.Second},
		Rate:    100, Burst: 1, MaxHosts: 10,
	})
	end := func(host string, r limits.Result, rateLimited bool, retryAfter time.Duration) {
		t.Helper()
		p, _, err := h.Admit(host, t0)
		if err != nil {
			t.Fatalf("Admit(%s): %v", host, err)
		}
		p.Done(t0, r, rateLimited, retryAfter)
	}
	end("slow:443", limits.Excluded, true, time.Minute) // a 429 with a minute's Retry-After
	end("down:443", limits.Failure, false, 0)           // a failure opens its breaker
	check := func(when string, want limits.HostStats) {
		t.Helper()
		if d := cmp.Diff(want, h.Stats()); d != "" {
			t.Errorf("%s: Stats (-want +got):\n%s", when, d)
		}
	}
	check("at once", limits.HostStats{Tracked: 2, Open: 1, Throttled: 1})
	h.Expire(t0.Add(30 * time.Second))
	check("30s later, the pause not over", limits.HostStats{Tracked: 2, Open: 1, Throttled: 1})
	h.Expire(t0.Add(time.Hour))
	check("an hour later", limits.HostStats{Tracked: 1, Open: 1})
}
