package dispatch

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func TestOutcomesForTheBreakers(t *testing.T) {
	tests := []struct {
		name    string
		out     taxonomy.Outcome
		breaker limits.Result
		host    limits.HostResult
	}{
		{"accepted", taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201}, limits.Success, limits.Answered},
		{"gone is a healthy round trip", taxonomy.Outcome{Code: taxonomy.Gone, Status: 410}, limits.Success, limits.Answered},
		{"key mismatch is a healthy round trip", taxonomy.Outcome{Code: taxonomy.KeyMismatch, Status: 403}, limits.Success, limits.Answered},
		{"payload too large answered", taxonomy.Outcome{Code: taxonomy.PayloadTooLarge, Status: 413}, limits.Success, limits.Answered},
		{"provider down", taxonomy.Outcome{Code: taxonomy.ProviderDown, Status: 503}, limits.Failure, limits.Answered},
		{"rate limited", taxonomy.Outcome{Code: taxonomy.RateLimited, Status: 429}, limits.Failure, limits.Answered},
		{"WNS throttles with 406", taxonomy.Outcome{Code: taxonomy.RateLimited, Status: 406}, limits.Failure, limits.Answered},
		{"no answer", taxonomy.Local("fcm", taxonomy.TransportError, "timeout"), limits.Failure, limits.TransportFailed},
		{"host skipped", taxonomy.Local("fallback", taxonomy.CircuitOpen, "skipped"), limits.Excluded, limits.NotSent},
		{"payload refused before sending", taxonomy.Local("fcm", taxonomy.PayloadTooLarge, "too big"), limits.Excluded, limits.NotSent},
		{"address blocked", taxonomy.Local("fallback", taxonomy.Blocked, "private"), limits.Excluded, limits.NotSent},
		{"signing failed", taxonomy.Local("fcm", taxonomy.Unauthorized, "no key"), limits.Excluded, limits.NotSent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := breakerResult(tc.out); got != tc.breaker {
				t.Errorf("breakerResult = %v, want %v", got, tc.breaker)
			}
			if got := hostResult(tc.out); got != tc.host {
				t.Errorf("hostResult = %v, want %v", got, tc.host)
			}
		})
	}
}

func newTestLimits(capacity int, rate float64) *providerLimits {
	pl := &providerLimits{
		id:     "fcm",
		slots:  limits.NewSlots(limits.SlotsConfig{Cap: capacity}),
		tokens: limits.NewTokens(rate, max(1, int(rate))),
	}
	pl.cfg.Store(&providers.Provider{ID: "fcm", Rate: rate, Burst: max(1, int(rate)), MaxInFlight: capacity})
	return pl
}

// TestGatherWaitsOnlyWhileTheLimitIsNear: a lane that found a backlog waits before its next read
// until the tokens LaneGather earns are there (at most LaneGather), or, with no rate, a moment
// for a few slots while most are taken; never when the bucket already holds them, when slots
// are plenty, or when the gather is off.
func TestGatherWaitsOnlyWhileTheLimitIsNear(t *testing.T) {
	tests := []struct {
		name     string
		rate     float64 // tokens a second; 0: no limit
		spend    int     // tokens taken from the full bucket first
		inFlight int     // of 64 slots
		gather   time.Duration
		want     time.Duration
	}{
		{name: "2,000/s, bucket empty: 20 ms earns 40", rate: 2000, spend: 2000, gather: 20 * time.Millisecond, want: 20 * time.Millisecond},
		{name: "50/s: 20 ms earns one token, no gather", rate: 50, spend: 50, gather: 20 * time.Millisecond, want: 0},
		{name: "2,000/s, bucket full", rate: 2000, gather: 20 * time.Millisecond, want: 0},
		{name: "no rate, slots plenty", rate: 0, inFlight: 10, gather: 20 * time.Millisecond, want: 0},
		{name: "no rate, nearly every slot taken", rate: 0, inFlight: 60, gather: 20 * time.Millisecond, want: slotGather},
		{name: "gather off", rate: 100, spend: 100, gather: 0, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestLimits(64, tc.rate)
			now := time.Now()
			pl.tokens.Take(now, tc.spend, 0)
			pl.slots.Take(tc.inFlight)
			l := &lane{laneParams: laneParams{cfg: &Config{LaneGather: tc.gather}, lim: pl}}
			got := l.gatherWait(64 - tc.inFlight)
			// The bucket refills while the test runs: a wait within a millisecond of want.
			if got > tc.want || got < tc.want-time.Millisecond {
				t.Errorf("gatherWait = %v, want %v", got, tc.want)
			}
		})
	}
}

// A provider an operator paused, that a reload adds to the registry (the drain of an orphan
// lane), starts paused: its lanes must not read before the next heartbeat says so.
func TestAddedProviderStartsAsPaused(t *testing.T) {
	reg, err := providers.Parse("registry.yaml", []byte(unitRegistry))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Config{Store: stream.New(nil, nil, stream.Options{Consumer: "unit"}), Sender: &fakeSender{}, Registry: reg,
		Keys: map[string]*vapid.Key{"default": unitKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	f := newFleetLimits(&cfg)
	f.pause([]string{"selfhosted"}, cfg.Logger)
	p := *reg.Fallback()
	p.ID = "selfhosted"
	if pl := f.add(&p, false); !pl.paused.Load() {
		t.Error("selfhosted, paused by an operator, was added unpaused")
	}
	p.ID = "other"
	if pl := f.add(&p, false); pl.paused.Load() {
		t.Error("other, which nobody paused, was added paused")
	}
}
