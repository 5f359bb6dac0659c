package dispatch

import (
	"context"
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
		bucket: limits.NewBucket(rate, 1),
	}
	pl.cfg.Store(&providers.Provider{ID: "fcm", Rate: rate, Burst: 1, MaxInFlight: capacity})
	return pl
}

func TestReadableBoundsReadsBySlotsAndTokens(t *testing.T) {
	tests := []struct {
		name           string
		rate           float64 // tokens a second; 0: no limit
		held, queued   int
		want           int
		wantPaceAtMost time.Duration
	}{
		{name: "no limit: the free slots", rate: 0, want: 16, wantPaceAtMost: time.Second},
		{name: "fast bucket: the free slots", rate: 1000, held: 6, want: 10, wantPaceAtMost: time.Millisecond * 5},
		{name: "slow bucket: a second of tokens", rate: 5, want: 5, wantPaceAtMost: 200 * time.Millisecond},
		{name: "less what already waits for tokens", rate: 5, queued: 3, want: 2, wantPaceAtMost: 200 * time.Millisecond},
		{name: "a second of tokens already waits", rate: 5, queued: 7, want: 0, wantPaceAtMost: 200 * time.Millisecond},
		{name: "very slow bucket: still one", rate: 0.3, want: 1, wantPaceAtMost: time.Second},
		{name: "no free slot", rate: 1000, held: 16, want: 0, wantPaceAtMost: 5 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestLimits(16, tc.rate)
			for range tc.held {
				if err := pl.slots.TryAcquire(false, ""); err != nil {
					t.Fatal(err)
				}
			}
			pl.queued.Store(int64(tc.queued))
			if got := pl.readable(); got != tc.want {
				t.Errorf("readable = %d, want %d", got, tc.want)
			}
			if got := pl.paceWait(time.Second); got > tc.wantPaceAtMost || got < 5*time.Millisecond {
				t.Errorf("paceWait = %v, want within [5ms, %v]", got, tc.wantPaceAtMost)
			}
		})
	}
}

func TestWaitTokenGivesTheTokenBackWhenStopped(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	pl := newTestLimits(4, 10) // a token every 100 ms, burst 1
	if err := pl.waitToken(context.Background(), c.Now); err != nil {
		t.Fatalf("first token: %v", err)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if err := pl.waitToken(stopped, c.Now); err == nil {
		t.Fatal("waitToken returned nil on a stopped lane with no token due")
	}
	c.Step(100 * time.Millisecond)
	if !pl.bucket.Allow(c.Now()) {
		t.Error("the token reserved by the stopped wait was not handed back")
	}
}

func TestThrottledBucketRecoversOncePerSecond(t *testing.T) {
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	pl := newTestLimits(4, 100)
	pl.bucket.Throttle(c.Now())
	pl.bucket.Throttle(c.Now())
	if got := pl.bucket.Rate(); got != 25 {
		t.Fatalf("rate after two throttles %v, want 25", got)
	}
	var last float64
	steps := []struct {
		after time.Duration
		want  string // "same", "higher" or "configured"
	}{
		{1200 * time.Millisecond, "higher"}, // the first call, more than a second after the throttle
		{500 * time.Millisecond, "same"},    // within a second of the last call: Recover is not asked
		{600 * time.Millisecond, "higher"},  // 1.1 s after the last call
		{20 * time.Second, "configured"},    // the climb stops at the configured rate
	}
	last = pl.bucket.Rate()
	for i, s := range steps {
		c.Step(s.after)
		pl.recoverAt(c.Now())
		got := pl.bucket.Rate()
		ok := map[string]bool{"same": got == last, "higher": got > last && got < 100, "configured": got == 100}[s.want]
		if !ok {
			t.Errorf("step %d (+%v): rate %v after %v, want %s", i, s.after, got, last, s.want)
		}
		last = got
	}
}

// TestTokenGatherWaitsOnlyWhileTheTokensAreTheLimit: a lane waits before it reads only while
// the entries already started wait for tokens, half of that queue's time and at most
// LaneGather; never when the bucket is unbounded, nothing waits, the wait would be under
// gatherWait, or the gather is off.
func TestTokenGatherWaitsOnlyWhileTheTokensAreTheLimit(t *testing.T) {
	tests := []struct {
		name   string
		rate   float64 // tokens a second; 0: no limit
		queued int
		gather time.Duration
		want   time.Duration
	}{
		{name: "40 queued at 2,000/s: half of 20 ms", rate: 2000, queued: 40, gather: 20 * time.Millisecond, want: 10 * time.Millisecond},
		{name: "bounded by LaneGather", rate: 100, queued: 40, gather: 20 * time.Millisecond, want: 20 * time.Millisecond},
		{name: "nothing queued", rate: 2000, queued: 0, gather: 20 * time.Millisecond, want: 0},
		{name: "under gatherWait", rate: 2000, queued: 3, gather: 20 * time.Millisecond, want: 0},
		{name: "no limit on the rate", rate: 0, queued: 40, gather: 20 * time.Millisecond, want: 0},
		{name: "gather off", rate: 100, queued: 40, gather: NoLinger, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newTestLimits(64, tc.rate)
			pl.queued.Store(int64(tc.queued))
			l := &lane{laneParams: laneParams{cfg: &Config{LaneGather: tc.gather}, lim: pl}}
			if got := l.tokenGather(); got != tc.want {
				t.Errorf("tokenGather = %v, want %v", got, tc.want)
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
