package limits_test

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// hlStep is one call on a HostLimits at t0+at, on host. do is one of
//
//	S F X             Admit; when it lets the request through, Done with that outcome
//	429 [dur]         Admit; Done(Failure, rate limited, Retry-After dur or none)
//	503 dur           Admit; Done(Failure, not rate limited, Retry-After dur)
//	admit             Admit, then Cancel
//	hold NAME         Admit, and keep the permit as NAME
//	end NAME R        Done(R) the permit NAME; "end NAME cancel" cancels it, "end NAME 503 dur"
//	                  ends it with a Failure and a Retry-After
//	rate R            check Rate(host) is R requests a second ("inf": none of its own)
//	state STATE       check State(host)
//	stats T O R       check Stats() is T tracked, O open, R throttled
//	configure R       Configure(now, R, 1)
//
// err and wait are what each Admit must answer. Steps come in order of at.
type hlStep struct {
	at   time.Duration
	host string
	do   string
	err  error
	wait time.Duration
}

var testResults = map[string]limits.Result{"S": S, "F": F, "X": X, "weird": limits.Result(9)}

var testStates = map[string]limits.State{"closed": limits.Closed, "half-open": limits.HalfOpen, "open": limits.Open}

// runHostLimits runs steps on h inside a testing/synctest bubble whose fake clock it steps
// along with now: the hosts' breakers are Breakers, which read time.Now.
func runHostLimits(t *testing.T, h *limits.HostLimits, steps []hlStep) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) { runHostSteps(t, h, steps) })
}

func runHostSteps(t *testing.T, h *limits.HostLimits, steps []hlStep) {
	t.Helper()
	held := map[string]*limits.HostPermit{}
	start := time.Now()
	for i, s := range steps {
		now := t0.Add(s.at)
		desc := fmt.Sprintf("step %d (%v %s %q)", i, s.at, s.host, s.do)
		if d := s.at - time.Since(start); d < 0 {
			t.Fatalf("%s: steps out of order", desc)
		} else if d > 0 {
			time.Sleep(d)
		}
		f := strings.Fields(s.do)
		admit := func() (*limits.HostPermit, bool) {
			t.Helper()
			p, wait, err := h.Admit(s.host, now)
			if !errors.Is(err, s.err) || wait != s.wait {
				t.Fatalf("%s: Admit = %v, %v; want %v, %v", desc, wait, err, s.wait, s.err)
			}
			return &p, err == nil
		}
		if r, ok := testResults[f[0]]; ok && len(f) == 1 {
			if p, ok := admit(); ok {
				p.Done(now, r, false, 0)
			}
			continue
		}
		switch f[0] {
		case "429", "503":
			var ra time.Duration
			if len(f) > 1 {
				ra = mustDuration(t, desc, f[1])
			}
			if p, ok := admit(); ok {
				p.Done(now, F, f[0] == "429", ra)
			}
		case "admit":
			if p, ok := admit(); ok {
				p.Cancel(now)
			}
		case "hold":
			p, ok := admit()
			if !ok {
				t.Fatalf("%s: refused", desc)
			}
			held[f[1]] = p
		case "end":
			p := held[f[1]]
			if p == nil {
				t.Fatalf("%s: nothing held as %q", desc, f[1])
			}
			switch f[2] {
			case "cancel":
				p.Cancel(now)
			case "503":
				p.Done(now, F, false, mustDuration(t, desc, f[3]))
			default:
				r, ok := testResults[f[2]]
				if !ok {
					t.Fatalf("%s: unknown result %q", desc, f[2])
				}
				p.Done(now, r, false, 0)
			}
		case "rate":
			want := math.Inf(1)
			if f[1] != "inf" {
				want = mustFloat(t, desc, f[1])
			}
			if got := h.Rate(s.host, now); math.Abs(got-want) > 1e-9 && got != want {
				t.Fatalf("%s: Rate = %v, want %v", desc, got, want)
			}
		case "state":
			want, ok := testStates[f[1]]
			if !ok {
				t.Fatalf("%s: unknown state %q", desc, f[1])
			}
			if got := h.State(s.host, now); got != want {
				t.Fatalf("%s: State = %v, want %v", desc, got, want)
			}
		case "stats":
			n := func(i int) int {
				v, err := strconv.Atoi(f[i])
				if err != nil {
					t.Fatalf("%s: %v", desc, err)
				}
				return v
			}
			want := limits.HostStats{Tracked: n(1), Open: n(2), Throttled: n(3)}
			if diff := cmp.Diff(want, h.Stats()); diff != "" {
				t.Fatalf("%s: Stats (-want +got):\n%s", desc, diff)
			}
		case "configure":
			h.Configure(now, mustFloat(t, desc, f[1]), 1)
		default:
			t.Fatalf("%s: unknown step", desc)
		}
	}
}

func mustDuration(t *testing.T, desc, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", desc, err)
	}
	return d
}

func mustFloat(t *testing.T, desc, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: %v", desc, err)
	}
	return v
}
