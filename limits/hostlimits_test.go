package limits_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// hostLimitsConfig: the breaker of testBreakerConfig (10s window of 1s slices, 4 outcomes, open
// at half, 5s cooldown, 2 probes); a throttled host starts from 100/s with a burst of 1, so its
// first token after a 429 comes 20ms later at the halved 50/s.
var hostLimitsConfig = limits.HostLimitsConfig{Breaker: testBreakerConfig, Rate: 100, Burst: 1}

// throttleConfig is hostLimitsConfig with a breaker that does not open (a 429 is a failure):
// for the tests of the throttle alone.
var throttleConfig = limits.HostLimitsConfig{Breaker: limits.BreakerConfig{MinSamples: 1000}, Rate: 100, Burst: 1}

// shortWindow is hostLimitsConfig with a 2s window, shorter than a throttled host's recovery.
var shortWindow = limits.HostLimitsConfig{
	Breaker: limits.BreakerConfig{FailureRatio: 0.5, Window: 2 * time.Second, MinSamples: 4, Cooldown: 5 * time.Second, Probes: 2},
	Rate:    100, Burst: 1,
}

const (
	ms       = time.Millisecond
	sec      = time.Second
	cooldown = 5 * time.Second // testBreakerConfig.Cooldown
)

var (
	errOpen   = limits.ErrOpen
	errPaused = limits.ErrPaused
)

// openA opens host a at t0 with four failures.
var openA = []hlStep{
	{0, "a", "F", nil, 0},
	{0, "a", "F", nil, 0},
	{0, "a", "F", nil, 0},
	{0, "a", "F", nil, 0},
	{0, "a", "state open", nil, 0},
}

func steps(parts ...[]hlStep) []hlStep {
	var all []hlStep
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// One host failing or throttled changes nothing for another: the regression behind HostLimits,
// where one unknown host answering 429 or 5xx paused and slowed every other one.
func TestHostLimitsIsolateHosts(t *testing.T) {
	otherUnaffected := []hlStep{
		{0, "b", "admit", nil, 0},
		{0, "b", "S", nil, 0},
		{0, "b", "state closed", nil, 0},
		{0, "b", "rate inf", nil, 0},
	}
	tests := []struct {
		name  string
		steps []hlStep
	}{
		{"failures open only their host's breaker", steps(openA, []hlStep{
			{0, "a", "admit", errOpen, cooldown},
			{0, "a", "stats 1 1 0", nil, 0},
		}, otherUnaffected, []hlStep{
			{0, "b", "stats 1 1 0", nil, 0}, // b, healthy, is not tracked
		})},
		{"429s throttle only their host", steps([]hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "429", nil, 20 * ms},
			{0, "a", "rate 25", nil, 0},
			{0, "a", "state closed", nil, 0},
			{0, "a", "stats 1 0 1", nil, 0},
		}, otherUnaffected, []hlStep{
			{0, "b", "stats 1 0 1", nil, 0},
		})},
		{"a Retry-After pauses only its host", steps([]hlStep{
			{0, "a", "503 30s", nil, 0},
			{0, "a", "admit", errPaused, 30 * sec},
			{0, "a", "stats 1 0 1", nil, 0},
		}, otherUnaffected)},
		{"a host open and throttled at once", steps([]hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "429", nil, 20 * ms},  // 1 token at 50/s
			{0, "a", "429", nil, 80 * ms},  // 2 at 25/s: the second 429's token was used
			{0, "a", "429", nil, 240 * ms}, // 3 at 12.5/s
			{0, "a", "state open", nil, 0},
			{0, "a", "stats 1 1 1", nil, 0},
		}, otherUnaffected)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runHostLimits(t, limits.NewHostLimits(hostLimitsConfig), tc.steps)
		})
	}
}

func TestHostLimitsThrottle(t *testing.T) {
	tests := []struct {
		name  string
		cfg   limits.HostLimitsConfig
		steps []hlStep
	}{
		// Each 429 comes within a second of the last (so nothing recovers) and after the bucket
		// has refilled its one token (so none waits).
		{"each 429 halves the host's rate, down to 1/64 of the base", throttleConfig, []hlStep{
			{0, "a", "rate inf", nil, 0},
			{0, "a", "429", nil, 0},
			{0, "a", "rate 50", nil, 0},
			{100 * ms, "a", "429", nil, 0},
			{100 * ms, "a", "rate 25", nil, 0},
			{200 * ms, "a", "429", nil, 0},
			{200 * ms, "a", "rate 12.5", nil, 0},
			{300 * ms, "a", "429", nil, 0},
			{500 * ms, "a", "429", nil, 0},
			{900 * ms, "a", "429", nil, 0},
			{900 * ms, "a", "rate 1.5625", nil, 0},
			{1800 * ms, "a", "429", nil, 0},
			{1800 * ms, "a", "rate 1.5625", nil, 0},
		}},
		{"the wait is for the host's own token at its throttled rate", throttleConfig, []hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "hold p1", nil, 20 * ms}, // the bucket starts empty: one token at 50/s
			{0, "a", "hold p2", nil, 40 * ms},
			{0, "a", "end p2 cancel", nil, 0}, // gives its token back
			{0, "a", "hold p3", nil, 40 * ms},
			{0, "a", "end p1 S", nil, 0}, // a sent request keeps its token
			{0, "a", "end p3 X", nil, 0}, // an excluded one gives it back
			{0, "a", "admit", nil, 40 * ms},
			{40 * ms, "a", "admit", nil, 0},
		}},
		{"a token waited out is spent even when cancelled", throttleConfig, []hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "hold p1", nil, 20 * ms},
			{30 * ms, "a", "end p1 cancel", nil, 0},
			{30 * ms, "a", "admit", nil, 10 * ms}, // half a token refilled since p1's
		}},
		{"recovery climbs a tenth of the base a second, then the host has no rate of its own", throttleConfig, []hlStep{
			{0, "a", "429", nil, 0},
			{sec / 2, "a", "rate 50", nil, 0}, // a second of quiet first
			{sec, "a", "rate 60", nil, 0},
			{3 * sec, "a", "rate 80", nil, 0},
			{3 * sec, "a", "stats 1 0 1", nil, 0},
			{5 * sec, "a", "rate inf", nil, 0},
			{5 * sec, "a", "stats 1 0 0", nil, 0},
			{5 * sec, "a", "admit", nil, 0},
			{5 * sec, "a", "admit", nil, 0},
		}},
		{"a 429 during recovery cuts again and restarts the quiet second", throttleConfig, []hlStep{
			{0, "a", "429", nil, 0},
			{2 * sec, "a", "rate 70", nil, 0},
			{3 * sec, "a", "429", nil, 0}, // Admit recovers to 80 first
			{3 * sec, "a", "rate 40", nil, 0},
			{3*sec + sec/2, "a", "rate 40", nil, 0},
			{4 * sec, "a", "rate 50", nil, 0},
		}},
		{"a new base keeps a throttled host throttled by the same fraction", throttleConfig, []hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "configure 40", nil, 0},
			{0, "a", "rate 20", nil, 0},
			{0, "b", "429", nil, 0},
			{0, "b", "rate 20", nil, 0}, // new hosts start from the new base
			{sec, "a", "rate 24", nil, 0},
		}},
		{"no base rate: a 429 has no rate to cut", limits.HostLimitsConfig{Breaker: testBreakerConfig}, []hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "rate inf", nil, 0},
			{0, "a", "admit", nil, 0},
			{0, "a", "stats 1 0 0", nil, 0}, // tracked for its breaker
		}},
		{"configuring no base rate lifts every host's rate", throttleConfig, []hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "configure 0", nil, 0},
			{0, "a", "rate inf", nil, 0},
			{0, "a", "stats 1 0 0", nil, 0},
			{0, "a", "admit", nil, 0},
		}},
		{"Retry-After holds the host until it has passed", hostLimitsConfig, []hlStep{
			{0, "a", "429 30s", nil, 0},
			{0, "a", "admit", errPaused, 30 * sec},
			{29 * sec, "a", "admit", errPaused, sec},
			{30 * sec, "a", "rate inf", nil, 0}, // the rate recovered meanwhile
			{30 * sec, "a", "stats 1 0 0", nil, 0},
			{30 * sec, "a", "admit", nil, 0},
			{30 * sec, "a", "stats 0 0 0", nil, 0}, // nothing left to remember: forgotten
		}},
		{"a shorter Retry-After does not shorten a pause", hostLimitsConfig, []hlStep{
			{0, "a", "hold p1", nil, 0},
			{0, "a", "503 30s", nil, 0},
			{sec, "a", "end p1 503 5s", nil, 0},
			{10 * sec, "a", "admit", errPaused, 20 * sec},
		}},
		// A throttled host is not forgotten while it recovers, so its window rolls past empty.
		{"old failures of a throttled host still leave the window", shortWindow, []hlStep{
			{0, "a", "F", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "429", nil, 0}, // three failures: one short of MinSamples
			{3 * sec, "a", "F", nil, 0},
			{3 * sec, "a", "state closed", nil, 0},
			{3 * sec, "a", "stats 1 0 1", nil, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runHostLimits(t, limits.NewHostLimits(tc.cfg), tc.steps)
		})
	}
}

// Half-open probes of one host, with the calls a lane makes; the transitions themselves are
// checked against Breaker in TestHostBreakerMatchesBreaker.
func TestHostLimitsProbes(t *testing.T) {
	halfOpen := cooldown + time.Nanosecond
	tests := []struct {
		name  string
		steps []hlStep
	}{
		{"open: the wait is the rest of the cooldown", steps(openA, []hlStep{
			{0, "a", "admit", errOpen, cooldown},
			{2 * sec, "a", "admit", errOpen, 3 * sec},
			{cooldown, "a", "admit", errOpen, time.Nanosecond},
			{halfOpen, "a", "state half-open", nil, 0},
			{halfOpen, "a", "stats 1 1 0", nil, 0},
		})},
		{"every probe out: refused with no known wait", steps(openA, []hlStep{
			{halfOpen, "a", "hold p1", nil, 0},
			{halfOpen, "a", "hold p2", nil, 0},
			{halfOpen, "a", "admit", errOpen, 0},
			{halfOpen, "b", "admit", nil, 0},
		})},
		{"a cancelled probe frees its place", steps(openA, []hlStep{
			{halfOpen, "a", "hold p1", nil, 0},
			{halfOpen, "a", "hold p2", nil, 0},
			{halfOpen, "a", "end p2 cancel", nil, 0},
			{halfOpen, "a", "hold p3", nil, 0},
			{halfOpen, "a", "end p1 S", nil, 0},
			{halfOpen, "a", "state half-open", nil, 0},
			{halfOpen, "a", "end p3 S", nil, 0},
			{halfOpen, "a", "state closed", nil, 0},
			{halfOpen, "a", "stats 1 0 0", nil, 0},
		})},
		{"a failed probe reopens for a full cooldown", steps(openA, []hlStep{
			{halfOpen, "a", "hold p1", nil, 0},
			{halfOpen + sec, "a", "end p1 F", nil, 0},
			{halfOpen + sec, "a", "admit", errOpen, cooldown},
		})},
		{"a paused host in half-open: the pause is the wait", steps([]hlStep{
			{0, "a", "F", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "503 1m", nil, 0},
			{0, "a", "admit", errOpen, time.Minute},
			{halfOpen, "a", "state half-open", nil, 0},
			{halfOpen, "a", "admit", errPaused, time.Minute - halfOpen},
		})},
		{"every probe out and a late Retry-After: the pause is the wait", steps([]hlStep{
			{0, "a", "hold late", nil, 0},
		}, openA, []hlStep{
			{halfOpen, "a", "hold p1", nil, 0},
			{halfOpen, "a", "hold p2", nil, 0},
			{halfOpen, "a", "end late 503 1m", nil, 0}, // from the closed state: pauses, does not reopen
			{halfOpen, "a", "state half-open", nil, 0},
			{halfOpen, "a", "admit", errOpen, time.Minute},
		})},
		{"a throttled probe waits for its token", steps([]hlStep{
			{0, "a", "F", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "429", nil, 0},
			{0, "a", "429", nil, 20 * ms},
			{0, "a", "state open", nil, 0},
			{6 * sec, "a", "state half-open", nil, 0},
			{6 * sec, "a", "rate 85", nil, 0}, // recovering meanwhile, from 25/s
			{6 * sec, "a", "hold p1", nil, 0},
			{6 * sec, "a", "hold p2", nil, time.Second / 85},
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runHostLimits(t, limits.NewHostLimits(hostLimitsConfig), tc.steps)
		})
	}
}

func TestHostLimitsExcluded(t *testing.T) {
	tests := []struct {
		name  string
		steps []hlStep
	}{
		{"an excluded outcome does not track a host", []hlStep{
			{0, "a", "X", nil, 0},
			{0, "a", "weird", nil, 0}, // any other Result is Excluded
			{0, "a", "admit", nil, 0}, // Cancel
			{0, "a", "stats 0 0 0", nil, 0},
		}},
		{"excluded outcomes count neither way", []hlStep{
			{0, "a", "F", nil, 0},
			{0, "a", "X", nil, 0},
			{0, "a", "X", nil, 0},
			{0, "a", "weird", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "state closed", nil, 0}, // 3 outcomes: below MinSamples
			{0, "a", "F", nil, 0},
			{0, "a", "state open", nil, 0},
		}},
		{"a permit ended twice counts once", []hlStep{
			{0, "a", "F", nil, 0},
			{0, "a", "F", nil, 0},
			{0, "a", "hold p", nil, 0},
			{0, "a", "end p S", nil, 0},
			{0, "a", "end p F", nil, 0},
			{0, "a", "state closed", nil, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runHostLimits(t, limits.NewHostLimits(hostLimitsConfig), tc.steps)
		})
	}
}

// The zero HostPermit, which Admit returns with an error, may be ended: nothing happens.
func TestHostPermitZero(t *testing.T) {
	var p limits.HostPermit
	p.Done(time.Now(), F, true, time.Hour)
	p.Cancel(time.Now())
}

// Successes before a host's first failure are not counted: the host was not tracked. Breaker,
// which sees every request of its provider, would count them and stay closed here.
func TestHostLimitsCountsFromFirstFailure(t *testing.T) {
	runHostLimits(t, limits.NewHostLimits(hostLimitsConfig), []hlStep{
		{0, "a", "S", nil, 0},
		{0, "a", "S", nil, 0},
		{0, "a", "S", nil, 0},
		{0, "a", "S", nil, 0},
		{0, "a", "stats 0 0 0", nil, 0},
		{0, "a", "F", nil, 0},
		{0, "a", "S", nil, 0},
		{0, "a", "F", nil, 0},
		{0, "a", "F", nil, 0}, // 3 of 4 since the first failure; 3 of 8 for the provider
		{0, "a", "state open", nil, 0},
	})
}

func TestHostLimitsTracking(t *testing.T) {
	// quick opens a host on its first failure; throttleOnly never opens one.
	quick := limits.HostLimitsConfig{
		Breaker: limits.BreakerConfig{FailureRatio: 1, Window: 10 * time.Second, MinSamples: 1, Cooldown: time.Minute, Probes: 1},
		Rate:    100, Burst: 1, MaxHosts: 2,
	}
	throttleOnly := throttleConfig
	throttleOnly.MaxHosts = 2
	tests := []struct {
		name  string
		cfg   limits.HostLimitsConfig
		steps []hlStep
	}{
		{"a healthy host is never tracked", quick, []hlStep{
			{0, "a", "S", nil, 0},
			{0, "b", "S", nil, 0},
			{0, "c", "admit", nil, 0},
			{0, "c", "stats 0 0 0", nil, 0},
		}},
		{"eviction takes the least recently failing, not the first tracked", throttleOnly, []hlStep{
			{0, "a", "429", nil, 0},
			{100 * ms, "b", "429", nil, 0},
			{200 * ms, "a", "429", nil, 0}, // a failed last: b is now the least recently failing
			{300 * ms, "c", "429", nil, 0}, // forgets b
			{300 * ms, "b", "rate inf", nil, 0},
			{300 * ms, "a", "rate 25", nil, 0},
			{300 * ms, "c", "rate 50", nil, 0},
			{300 * ms, "c", "stats 2 0 2", nil, 0},
		}},
		{"a success is not a failure: it keeps no host from being forgotten", throttleOnly, []hlStep{
			{0, "a", "hold p", nil, 0},
			{0, "a", "429", nil, 0},
			{100 * ms, "b", "429", nil, 0},
			{200 * ms, "a", "end p S", nil, 0}, // a stays the least recently failing
			{300 * ms, "c", "429", nil, 0},     // forgets a
			{300 * ms, "a", "rate inf", nil, 0},
			{300 * ms, "b", "rate 50", nil, 0},
			{300 * ms, "c", "rate 50", nil, 0},
		}},
		{"an open host is forgotten like any other, after those that failed before it", quick, []hlStep{
			{0, "b", "429", nil, 0},
			{1, "a", "F", nil, 0},
			{1, "a", "admit", errOpen, time.Minute},
			{2, "c", "429", nil, 0}, // forgets b, not the open a
			{2, "a", "admit", errOpen, time.Minute - 1},
			{2, "b", "rate inf", nil, 0},
			{3, "d", "429", nil, 0}, // now a is the least recently failing
			{3, "a", "admit", nil, 0},
			{3, "a", "stats 2 2 2", nil, 0}, // c and d: their 429 opened them too
		}},
		{"tracked from the first failure, 429 or Retry-After", limits.HostLimitsConfig{Breaker: testBreakerConfig, Rate: 100}, []hlStep{
			{0, "a", "F", nil, 0},
			{0, "b", "429", nil, 0},
			{0, "c", "hold p", nil, 0},
			{0, "c", "end p 503 1s", nil, 0},
			{0, "d", "S", nil, 0},
			{0, "d", "stats 3 0 2", nil, 0},
		}},
		{"a host healthy for a whole window is forgotten when next seen", limits.HostLimitsConfig{Breaker: testBreakerConfig, MaxHosts: 10}, []hlStep{
			{0, "a", "F", nil, 0},
			{0, "b", "F", nil, 0},
			{9 * sec, "a", "S", nil, 0},
			{9 * sec, "a", "stats 2 0 0", nil, 0},
			{10 * sec, "a", "S", nil, 0},
			{10 * sec, "a", "stats 1 0 0", nil, 0},
			{10 * sec, "b", "admit", nil, 0},
			{10 * sec, "b", "stats 0 0 0", nil, 0},
		}},
		{"a host is forgotten by the success that ends its window", limits.HostLimitsConfig{Breaker: testBreakerConfig, MaxHosts: 10}, []hlStep{
			{0, "a", "F", nil, 0},
			{9 * sec, "a", "hold p", nil, 0},
			{10 * sec, "a", "end p S", nil, 0},
			{10 * sec, "a", "stats 0 0 0", nil, 0},
		}},
		{"a throttled host is not forgotten until its rate has recovered", shortWindow, []hlStep{
			{0, "a", "429", nil, 0},
			{3 * sec, "a", "rate 80", nil, 0},
			{3 * sec, "a", "admit", nil, 0},
			{3 * sec, "a", "stats 1 0 1", nil, 0},
			{5 * sec, "a", "rate inf", nil, 0},
			{5 * sec, "a", "stats 1 0 0", nil, 0},
			{5 * sec, "a", "admit", nil, 0},
			{5 * sec, "a", "stats 0 0 0", nil, 0},
		}},
		{"a recovered host without failures in the window is forgotten", limits.HostLimitsConfig{Breaker: testBreakerConfig, Rate: 100, Burst: 1, MaxHosts: 10}, []hlStep{
			{0, "a", "429", nil, 0},
			{0, "a", "stats 1 0 1", nil, 0},
			{20 * sec, "a", "admit", nil, 0},
			{20 * sec, "a", "stats 0 0 0", nil, 0},
		}},
		{"keys are used as given: callers normalise", quick, []hlStep{
			{0, "Push.Example:443", "F", nil, 0},
			{0, "push.example:443", "admit", nil, 0},
			{0, "Push.Example:443", "admit", errOpen, time.Minute},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runHostLimits(t, limits.NewHostLimits(tc.cfg), tc.steps)
		})
	}
}

// Forgetting an open host to make room reports it closed, so a gauge kept from the
// transitions stays right.
func TestHostLimitsOnChangeReportsEviction(t *testing.T) {
	var got []string
	h := limits.NewHostLimits(limits.HostLimitsConfig{
		Breaker:  limits.BreakerConfig{FailureRatio: 1, MinSamples: 1, Cooldown: time.Minute, Probes: 1},
		MaxHosts: 1,
		OnChange: func(host string, from, to limits.State) { got = append(got, fmt.Sprintf("%s %v->%v", host, from, to)) },
	})
	runHostLimits(t, h, []hlStep{
		{0, "a", "F", nil, 0},
		{0, "b", "F", nil, 0},
		{0, "b", "stats 1 1 0", nil, 0},
	})
	want := []string{"a closed->open", "a open->closed", "b closed->open"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("transitions (-want +got):\n%s", diff)
	}
}

// Hosts are client-supplied: however many fail, at most MaxHosts are remembered, and the
// most recently failing are the ones kept.
func TestHostLimitsStaysBounded(t *testing.T) {
	h := limits.NewHostLimits(limits.HostLimitsConfig{
		Breaker:  limits.BreakerConfig{FailureRatio: 1, MinSamples: 1},
		MaxHosts: 100,
	})
	for i := range 10_000 {
		now := t0.Add(time.Duration(i))
		p, _, err := h.Admit(fmt.Sprintf("h%d:443", i), now)
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
		p.Done(now, F, false, 0)
	}
	if diff := cmp.Diff(limits.HostStats{Tracked: 100, Open: 100}, h.Stats()); diff != "" {
		t.Fatalf("Stats (-want +got):\n%s", diff)
	}
	now := t0.Add(10_000)
	if h.State("h9899:443", now) != limits.Closed || h.State("h9900:443", now) != limits.Open {
		t.Fatal("want the 100 most recently failing hosts kept and the older ones forgotten")
	}
}
