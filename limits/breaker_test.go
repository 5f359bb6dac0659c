package limits_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// gobreaker reads time.Now itself and has no clock option. Every test here runs inside a
// testing/synctest bubble, where time.Now is the bubble's fake clock and time.Sleep advances it
// instantly: that is how these tests step the breaker's injected clock.

// testBreakerConfig: a 10s window cut into 1s buckets, at least 4 outcomes, open at half.
var testBreakerConfig = limits.BreakerConfig{
	FailureRatio: 0.5,
	Window:       10 * time.Second,
	MinSamples:   4,
	Cooldown:     5 * time.Second,
	Probes:       2,
}

const (
	S = limits.Success
	F = limits.Failure
	X = limits.Excluded
)

// send lets one request through b and reports r; it fails the test when b refuses.
func send(t *testing.T, b *limits.Breaker, r limits.Result) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow in state %v: %v", b.State(), err)
	}
	done(r)
}

func TestBreakerOpensAtRatioWithMinSamples(t *testing.T) {
	tests := []struct {
		name string
		cfg  limits.BreakerConfig
		seq  []limits.Result
		// openAt is the index in seq of the result that opens the breaker; -1: never opens.
		openAt int
	}{
		{"failures below MinSamples never open", testBreakerConfig, []limits.Result{F, F, F}, -1},
		{"MinSamples reached at exactly the ratio", testBreakerConfig, []limits.Result{S, S, F, F}, 3},
		{"first failure at MinSamples, below the ratio", testBreakerConfig, []limits.Result{S, S, S, F, F, F}, 5},
		{"successes alone never open", testBreakerConfig, []limits.Result{S, S, S, S, S, S, S, S}, -1},
		{"excluded results do not count toward MinSamples", testBreakerConfig, []limits.Result{F, X, X, X, X, F, X, F, X, F}, 9},
		{"excluded results do not dilute the ratio", testBreakerConfig, []limits.Result{X, S, X, S, X, F, X, X, X, F}, 9},
		{"only excluded results never open", testBreakerConfig, []limits.Result{X, X, X, X, X, X}, -1},
		{
			name: "ratio 0.4 is reached by 8 of 20 exactly",
			cfg:  limits.BreakerConfig{FailureRatio: 0.4, Window: time.Minute, MinSamples: 20, Cooldown: time.Second, Probes: 1},
			seq: []limits.Result{
				S, S, S, S, S, S, S, S, S, S, S, S, F, F, F, F, F, F, F, // 7 of 19: below MinSamples
				F, // 8 of 20
			},
			openAt: 19,
		},
		{
			name: "ratio 0.4 is not reached by 7 of 20",
			cfg:  limits.BreakerConfig{FailureRatio: 0.4, Window: time.Minute, MinSamples: 20, Cooldown: time.Second, Probes: 1},
			seq: []limits.Result{
				S, S, S, S, S, S, S, S, S, S, S, S, S, F, F, F, F, F, F, F,
			},
			openAt: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := limits.NewBreaker("p", tc.cfg, nil)
				for i, r := range tc.seq {
					send(t, b, r)
					want := limits.Closed
					if tc.openAt >= 0 && i >= tc.openAt {
						want = limits.Open
					}
					if got := b.State(); got != want {
						t.Fatalf("after result %d (%v): state %v, want %v", i, r, got, want)
					}
					if want == limits.Open {
						// Tripped says what opened it: the window's failures and outcomes.
						var failures, outcomes uint32
						for _, r := range tc.seq[:i+1] {
							if r != X {
								outcomes++
							}
							if r == F {
								failures++
							}
						}
						if f, o := b.Tripped(); f != failures || o != outcomes {
							t.Fatalf("Tripped() = %d failures of %d outcomes, want %d of %d", f, o, failures, outcomes)
						}
						return
					}
				}
			})
		})
	}
}

// Requests still in flight are in gobreaker's Counts.Requests but are not outcomes: with ten
// requests out and two failed, the sample is 2, below MinSamples, however it looks by count.
func TestBreakerInFlightRequestsAreNotSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := limits.NewBreaker("p", testBreakerConfig, nil)
		var pending []func(limits.Result)
		for range 10 {
			done, err := b.Allow()
			if err != nil {
				t.Fatalf("Allow: %v", err)
			}
			pending = append(pending, done)
		}
		pending[0](F)
		pending[1](F)
		if got := b.State(); got != limits.Closed {
			t.Fatalf("2 failures with 8 in flight: state %v, want closed", got)
		}
		pending[2](F)
		pending[3](F)
		if got := b.State(); got != limits.Open {
			t.Fatalf("4 of 4 outcomes failed: state %v, want open", got)
		}
	})
}

func TestBreakerWindowRolls(t *testing.T) {
	tests := []struct {
		name  string
		sleep time.Duration // between the old failures and the new outcomes
		want  limits.State
	}{
		// The window is 10 buckets of 1s: outcomes of bucket 0 leave it when bucket 10 starts.
		{"old failures still in the window", 9*time.Second + 999*time.Millisecond, limits.Open},
		{"old failures aged out", 10 * time.Second, limits.Closed},
		{"long idle clears everything", time.Hour, limits.Closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := limits.NewBreaker("p", testBreakerConfig, nil)
				for range 3 { // below MinSamples: does not open
					send(t, b, F)
				}
				time.Sleep(tc.sleep)
				// 1 failure in 4 on its own; 4 in 7 with the old ones still counted.
				for _, r := range []limits.Result{S, S, S, F} {
					send(t, b, r)
				}
				if got := b.State(); got != tc.want {
					t.Fatalf("state %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// trip opens b (testBreakerConfig) with four failures.
func trip(t *testing.T, b *limits.Breaker) {
	t.Helper()
	for range 4 {
		send(t, b, F)
	}
	if got := b.State(); got != limits.Open {
		t.Fatalf("after 4 failures: state %v, want open", got)
	}
}

func TestBreakerOpenCooldownAndOpenFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := limits.NewBreaker("p", testBreakerConfig, nil)
		if got := b.OpenFor(); got != 0 {
			t.Fatalf("OpenFor while closed = %v, want 0", got)
		}
		trip(t, b)
		steps := []struct {
			name    string
			sleep   time.Duration
			state   limits.State
			openFor time.Duration
		}{
			{"just opened", 0, limits.Open, 5 * time.Second},
			{"2s into the cooldown", 2 * time.Second, limits.Open, 3 * time.Second},
			{"1ns before the end", 3*time.Second - time.Nanosecond, limits.Open, time.Nanosecond},
			// gobreaker leaves Open strictly after the cooldown: OpenFor stays > 0 while Open.
			{"at the end of the cooldown", time.Nanosecond, limits.Open, time.Nanosecond},
			{"past the cooldown", time.Nanosecond, limits.HalfOpen, 0},
		}
		for _, s := range steps {
			time.Sleep(s.sleep)
			if s.state == limits.Open {
				if _, err := b.Allow(); !errors.Is(err, limits.ErrOpen) {
					t.Fatalf("%s: Allow = %v, want ErrOpen", s.name, err)
				}
			}
			if got := b.State(); got != s.state {
				t.Fatalf("%s: state %v, want %v", s.name, got, s.state)
			}
			if got := b.OpenFor(); got != s.openFor {
				t.Fatalf("%s: OpenFor = %v, want %v", s.name, got, s.openFor)
			}
		}
	})
}

func TestBreakerHalfOpenProbes(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, b *limits.Breaker) // runs in the half-open state
		want limits.State
	}{
		{
			name: "all probes succeed: closed",
			run: func(t *testing.T, b *limits.Breaker) {
				d1, d2 := allow(t, b), allow(t, b)
				d1(S)
				if got := b.State(); got != limits.HalfOpen {
					t.Fatalf("after 1 of 2 probes: state %v, want half-open", got)
				}
				d2(S)
			},
			want: limits.Closed,
		},
		{
			name: "all probes out: ErrOpen",
			run: func(t *testing.T, b *limits.Breaker) {
				allow(t, b)
				allow(t, b)
				if _, err := b.Allow(); !errors.Is(err, limits.ErrOpen) {
					t.Fatalf("third probe: Allow = %v, want ErrOpen", err)
				}
			},
			want: limits.HalfOpen,
		},
		{
			name: "a failed probe reopens",
			run: func(t *testing.T, b *limits.Breaker) {
				d1, d2 := allow(t, b), allow(t, b)
				d1(S)
				d2(F)
				if got := b.OpenFor(); got != testBreakerConfig.Cooldown {
					t.Fatalf("reopened: OpenFor = %v, want a full cooldown %v", got, testBreakerConfig.Cooldown)
				}
			},
			want: limits.Open,
		},
		{
			name: "an excluded probe frees its place for another",
			run: func(t *testing.T, b *limits.Breaker) {
				d1, d2 := allow(t, b), allow(t, b)
				d1(X)
				d3 := allow(t, b)
				d2(S)
				d3(S)
			},
			want: limits.Closed,
		},
		{
			name: "a probe reported twice counts once",
			run: func(t *testing.T, b *limits.Breaker) {
				d1 := allow(t, b)
				d1(S)
				d1(S)
			},
			want: limits.HalfOpen,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := limits.NewBreaker("p", testBreakerConfig, nil)
				trip(t, b)
				time.Sleep(testBreakerConfig.Cooldown + time.Nanosecond)
				tc.run(t, b)
				if got := b.State(); got != tc.want {
					t.Fatalf("state %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func allow(t *testing.T, b *limits.Breaker) func(limits.Result) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow in state %v: %v", b.State(), err)
	}
	return done
}

// A request let through before the breaker opened and answered after must not count in the
// new state: a slow failure from before an outage cannot reopen a half-open breaker.
func TestBreakerIgnoresResultsFromAnEarlierState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := limits.NewBreaker("p", testBreakerConfig, nil)
		late := allow(t, b)
		trip(t, b)
		time.Sleep(testBreakerConfig.Cooldown + time.Nanosecond)
		if got := b.State(); got != limits.HalfOpen {
			t.Fatalf("state %v, want half-open", got)
		}
		late(F)
		if got := b.State(); got != limits.HalfOpen {
			t.Fatalf("after a failure from the closed state: %v, want still half-open", got)
		}
	})
}

func TestBreakerOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		b := limits.NewBreaker("autopush", testBreakerConfig, func(name string, from, to limits.State) {
			got = append(got, fmt.Sprintf("%s %v->%v", name, from, to))
		})
		trip(t, b)
		time.Sleep(testBreakerConfig.Cooldown + time.Nanosecond)
		send(t, b, F) // probe fails
		time.Sleep(testBreakerConfig.Cooldown + time.Nanosecond)
		send(t, b, S)
		send(t, b, S)
		b.State()
		want := []string{
			"autopush closed->open",
			"autopush open->half-open",
			"autopush half-open->open",
			"autopush open->half-open",
			"autopush half-open->closed",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("transitions (-want +got):\n%s", diff)
		}
	})
}

func TestBreakerZeroConfigTakesDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := limits.NewBreaker("p", limits.BreakerConfig{}, nil)
		for range 19 { // default MinSamples is 20
			send(t, b, F)
		}
		if got := b.State(); got != limits.Closed {
			t.Fatalf("19 failures: state %v, want closed", got)
		}
		send(t, b, F)
		if got, want := b.OpenFor(), 15*time.Second; got != want {
			t.Fatalf("OpenFor = %v, want the default cooldown %v", got, want)
		}
	})
}

func TestStateAndResultStrings(t *testing.T) {
	got := []string{
		limits.Closed.String(), limits.HalfOpen.String(), limits.Open.String(), limits.State(9).String(),
		S.String(), F.String(), X.String(), limits.Result(9).String(),
	}
	want := []string{"closed", "half-open", "open", "State(9)", "success", "failure", "excluded", "Result(9)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("strings (-want +got):\n%s", diff)
	}
}
