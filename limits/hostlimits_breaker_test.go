package limits_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// A host's ratio breaker must behave as the provider's Breaker does. Each script runs on a
// Breaker (gobreaker, which reads time.Now) and on one host of a HostLimits given time.Now,
// inside a testing/synctest bubble so both see the same stepped clock; after every step the
// two must agree on whether a request may go, on the state, on the time left of an open
// breaker's cooldown, and at the end on every transition.
//
// Every script starts with a failure: a host is tracked from its first failure, so successes
// before it are not counted (TestHostLimitsCountsFromFirstFailure), where Breaker counts them.
//
// Steps, separated by spaces:
//
//	S F X     let a request through (both must agree whether they may) and report its outcome
//	+name     let a request through and hold it
//	name=R    report R for the held request name
//	~dur      sleep dur (time.ParseDuration)
func TestHostBreakerMatchesBreaker(t *testing.T) {
	tests := []struct {
		name   string
		cfg    limits.BreakerConfig
		script string
	}{
		{"four failures open", testBreakerConfig, "F F F F"},
		{"below MinSamples never opens", testBreakerConfig, "F F F"},
		{"MinSamples reached at exactly the ratio", testBreakerConfig, "F S F S"},
		{"below the ratio stays closed", testBreakerConfig, "F S S S F S S S S F S S"},
		{"excluded results do not count toward MinSamples", testBreakerConfig, "F X X X X F X F X F"},
		{"excluded results do not dilute the ratio", testBreakerConfig, "F X S X S X X X F"},
		{
			name:   "ratio 0.4 is reached by 8 of 20 exactly",
			cfg:    limits.BreakerConfig{FailureRatio: 0.4, Window: time.Minute, MinSamples: 20, Cooldown: time.Second, Probes: 1},
			script: "F S S S S S S S S S S S S F F F F F F F",
		},
		{
			name:   "ratio 0.4 is not reached by 7 of 20",
			cfg:    limits.BreakerConfig{FailureRatio: 0.4, Window: time.Minute, MinSamples: 20, Cooldown: time.Second, Probes: 1},
			script: "F S S S S S S S S S S S S S F F F F F F",
		},
		{"requests in flight are not samples", testBreakerConfig, "+a +b +c +d +e a=F b=F c=F d=F"},
		{"old failures still in the window", testBreakerConfig, "F F F ~9.999s S S S F"},
		{"old failures aged out", testBreakerConfig, "F F F ~10s S S S F"},
		{"failures age out slice by slice", testBreakerConfig, "F ~3s F ~3s F ~3.5s S ~0.5s F F"},
		{"a request counts in the slice it started in", testBreakerConfig, "+a F F ~9.5s a=F ~0.5s F S F"},
		{"long idle clears everything", testBreakerConfig, "F F F ~1h F"},
		{"a sub-second window has slices of 100ms", limits.BreakerConfig{Window: 250 * time.Millisecond, MinSamples: 2, Cooldown: time.Second, Probes: 1},
			"F ~0.25s F ~0.05s F"},
		{"open for the cooldown, then half-open", testBreakerConfig, "F F F F ~2s ~2.999999999s ~1ns ~1ns"},
		{"all probes succeed: closed", testBreakerConfig, "F F F F ~5.000000001s +a +b a=S b=S F"},
		{"all probes out: refused", testBreakerConfig, "F F F F ~5.000000001s +a +b S a=S S"},
		{"a failed probe reopens for a full cooldown", testBreakerConfig, "F F F F ~5.000000001s +a +b a=S b=F ~1s"},
		{"an excluded probe frees its place", testBreakerConfig, "F F F F ~5.000000001s +a +b a=X +c b=S c=S"},
		{"a probe reported twice counts once", testBreakerConfig, "F F F F ~5.000000001s +a a=S a=S"},
		{"a result from the closed state does not count half-open", testBreakerConfig, "F +late F F F ~5.000000001s late=F S S"},
		{"a result from before the opening does not reopen", testBreakerConfig, "F +late F F F late=F ~5.000000001s S S"},
		{"closed again: a fresh window", testBreakerConfig, "F F F F ~5.000000001s S S F F F ~1s F"},
		{"reopened and closed twice", testBreakerConfig, "F F F F ~5.000000001s F ~5.000000001s S S F F F F"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var want, got []string
				b := limits.NewBreaker("h:443", tc.cfg, func(name string, from, to limits.State) {
					want = append(want, fmt.Sprintf("%s %v->%v", name, from, to))
				})
				h := limits.NewHostLimits(limits.HostLimitsConfig{Breaker: tc.cfg, OnChange: func(host string, from, to limits.State) {
					got = append(got, fmt.Sprintf("%s %v->%v", host, from, to))
				}})
				runBoth(t, b, h, "h:443", tc.script)
				b.State()
				h.State("h:443", time.Now())
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("transitions (-Breaker +HostLimits):\n%s", diff)
				}
			})
		})
	}
}

// heldPair is one request let through both breakers and not yet reported.
type heldPair struct {
	done func(limits.Result)
	p    *limits.HostPermit
}

func runBoth(t *testing.T, b *limits.Breaker, h *limits.HostLimits, host, script string) {
	t.Helper()
	held := map[string]heldPair{}
	results := map[string]limits.Result{"S": S, "F": F, "X": X}
	admit := func(step string) (heldPair, bool) {
		done, errB := b.Allow()
		p, _, errH := h.Admit(host, time.Now())
		if (errB == nil) != (errH == nil) {
			t.Fatalf("step %q: Breaker.Allow = %v, HostLimits.Admit = %v", step, errB, errH)
		}
		if errH != nil && !errors.Is(errH, limits.ErrOpen) {
			t.Fatalf("step %q: Admit = %v, want ErrOpen", step, errH)
		}
		return heldPair{done, &p}, errB == nil
	}
	for i, step := range strings.Fields(script) {
		r, isResult := results[step]
		switch {
		case isResult:
			if pair, ok := admit(step); ok {
				pair.done(r)
				pair.p.Done(time.Now(), r, false, 0)
			}
		case strings.HasPrefix(step, "+"):
			pair, ok := admit(step)
			if !ok {
				t.Fatalf("step %d %q: refused", i, step)
			}
			held[step[1:]] = pair
		case strings.HasPrefix(step, "~"):
			d, err := time.ParseDuration(step[1:])
			if err != nil {
				t.Fatalf("step %d %q: %v", i, step, err)
			}
			time.Sleep(d)
		case strings.Contains(step, "="):
			name, r, _ := strings.Cut(step, "=")
			pair, ok := held[name]
			if !ok {
				t.Fatalf("step %d %q: nothing held as %q", i, step, name)
			}
			pair.done(results[r])
			pair.p.Done(time.Now(), results[r], false, 0)
		default:
			t.Fatalf("step %d: unknown step %q", i, step)
		}
		if sb, sh := b.State(), h.State(host, time.Now()); sb != sh {
			t.Fatalf("after step %d %q: Breaker %v, HostLimits %v", i, step, sb, sh)
		}
		if b.State() == limits.Open {
			_, wait, err := h.Admit(host, time.Now())
			if !errors.Is(err, limits.ErrOpen) || wait != b.OpenFor() {
				t.Fatalf("after step %d %q: Admit = %v, %v; want ErrOpen, Breaker.OpenFor %v", i, step, wait, err, b.OpenFor())
			}
		}
	}
}
