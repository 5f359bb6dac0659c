package limits_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// hostStep is one call on a HostBreaker at t0+at. op is "allow" (want is Allow's answer),
// "refuses" (want is Refuses's answer) or a HostResult to Record. skipped and tracked are checked after the call.
type hostStep struct {
	at      time.Duration
	host    string
	op      any // "allow" or a limits.HostResult
	want    bool
	skipped int
	tracked int
}

const (
	fail    = limits.TransportFailed
	answer  = limits.Answered
	notSent = limits.NotSent
	cool    = 300 * time.Second
)

func TestHostBreaker(t *testing.T) {
	// opens "a" at t0: three consecutive transport failures.
	openA := []hostStep{
		{0, "a", fail, false, 0, 1},
		{0, "a", "allow", true, 0, 1},
		{0, "a", fail, false, 0, 1},
		{0, "a", "allow", true, 0, 1},
		{0, "a", fail, false, 1, 1},
		{0, "a", "allow", false, 1, 1},
	}
	tests := []struct {
		name  string
		cfg   limits.HostBreakerConfig
		steps []hostStep
	}{
		{"three consecutive failures open", limits.HostBreakerConfig{}, openA},
		{"unknown hosts are allowed and not tracked", limits.HostBreakerConfig{}, []hostStep{
			{0, "a", "allow", true, 0, 0},
			{0, "a", answer, false, 0, 0},
			{0, "a", notSent, false, 0, 0},
		}},
		{"an answer in between resets the count", limits.HostBreakerConfig{}, []hostStep{
			{0, "a", fail, false, 0, 1},
			{0, "a", fail, false, 0, 1},
			{0, "a", answer, false, 0, 0},
			{0, "a", fail, false, 0, 1},
			{0, "a", fail, false, 0, 1},
			{0, "a", "allow", true, 0, 1},
			{0, "a", fail, false, 1, 1},
		}},
		{"NotSent neither counts nor resets", limits.HostBreakerConfig{}, []hostStep{
			{0, "a", fail, false, 0, 1},
			{0, "a", fail, false, 0, 1},
			{0, "a", notSent, false, 0, 1},
			{0, "a", notSent, false, 0, 1},
			{0, "a", "allow", true, 0, 1},
			{0, "a", fail, false, 1, 1},
		}},
		{"skipped for the cooldown, then exactly one probe per cooldown", limits.HostBreakerConfig{}, append(openA[:6:6],
			hostStep{cool - time.Nanosecond, "a", "allow", false, 1, 1},
			hostStep{cool, "a", "allow", true, 1, 1},
			hostStep{cool, "a", "allow", false, 1, 1},
			hostStep{2*cool - time.Nanosecond, "a", "allow", false, 1, 1},
			// The first probe never came back (a stall): the next goes one cooldown after it.
			hostStep{2 * cool, "a", "allow", true, 1, 1},
			hostStep{2 * cool, "a", "allow", false, 1, 1},
		)},
		{"Refuses answers as Allow would, without taking the probe", limits.HostBreakerConfig{}, append(openA[:6:6],
			hostStep{0, "b", "refuses", false, 1, 1},
			hostStep{cool - time.Nanosecond, "a", "refuses", true, 1, 1},
			hostStep{cool, "a", "refuses", false, 1, 1},
			hostStep{cool, "a", "refuses", false, 1, 1},
			hostStep{cool, "a", "allow", true, 1, 1}, // the probe is still there
			hostStep{cool, "a", "refuses", true, 1, 1},
		)},
		{"a probe answered closes the host", limits.HostBreakerConfig{}, append(openA[:6:6],
			hostStep{cool, "a", "allow", true, 1, 1},
			hostStep{cool + time.Second, "a", answer, false, 0, 0},
			hostStep{cool + time.Second, "a", "allow", true, 0, 0},
			hostStep{cool + time.Second, "a", fail, false, 0, 1}, // counting starts again
			hostStep{cool + time.Second, "a", "allow", true, 0, 1},
		)},
		{"a probe failed keeps it open; the next probe is a cooldown after the probe", limits.HostBreakerConfig{}, append(openA[:6:6],
			hostStep{cool, "a", "allow", true, 1, 1},
			hostStep{cool + 10*time.Second, "a", fail, false, 1, 1},
			hostStep{cool + 20*time.Second, "a", "allow", false, 1, 1},
			hostStep{2*cool - time.Nanosecond, "a", "allow", false, 1, 1},
			hostStep{2 * cool, "a", "allow", true, 1, 1},
		)},
		{"other hosts are not affected", limits.HostBreakerConfig{}, append(openA[:6:6],
			hostStep{0, "b", "allow", true, 1, 1},
			hostStep{0, "b", fail, false, 1, 2},
			hostStep{0, "b", "allow", true, 1, 2},
		)},
		{"keys are used as given: callers normalise", limits.HostBreakerConfig{}, []hostStep{
			{0, "Push.Example:443", fail, false, 0, 1},
			{0, "Push.Example:443", fail, false, 0, 1},
			{0, "Push.Example:443", fail, false, 1, 1},
			{0, "push.example:443", "allow", true, 1, 1},
			{0, "Push.Example:443", "allow", false, 1, 1},
		}},
		{"configured failures and cooldown", limits.HostBreakerConfig{Failures: 1, Cooldown: time.Second}, []hostStep{
			{0, "a", fail, false, 1, 1},
			{0, "a", "allow", false, 1, 1},
			{time.Second, "a", "allow", true, 1, 1},
		}},
		{"eviction takes the least recently failing, not the first tracked", limits.HostBreakerConfig{MaxHosts: 2}, []hostStep{
			{1, "a", fail, false, 0, 1},
			{2, "b", fail, false, 0, 2},
			{3, "a", fail, false, 0, 2}, // a failed last: b is now the least recently failing
			{4, "c", fail, false, 0, 2}, // evicts b
			{5, "a", fail, false, 1, 2}, // a kept its two failures: the third opens it
			{6, "a", "allow", false, 1, 2},
		}},
		{"a skipped host is evicted only after hosts that failed before it", limits.HostBreakerConfig{MaxHosts: 2}, []hostStep{
			{0, "b", fail, false, 0, 1},
			{1, "a", fail, false, 0, 2},
			{2, "a", fail, false, 0, 2},
			{3, "a", fail, false, 1, 2},
			{4, "c", fail, false, 1, 2}, // evicts b (last failed at 0), not the skipped a
			{4, "a", "allow", false, 1, 2},
			{5, "d", fail, false, 0, 2}, // now a (last failed at 3) is the oldest: forgotten
			{5, "a", "allow", true, 0, 2},
		}},
		{"only a failure counts as use: an Allow, a probe or a NotSent keeps no host", limits.HostBreakerConfig{Failures: 1, Cooldown: time.Second, MaxHosts: 2}, []hostStep{
			{0, "a", fail, false, 1, 1},
			{1, "b", fail, false, 2, 2},
			{time.Second, "a", "allow", true, 2, 2}, // a's probe
			{time.Second, "a", notSent, false, 2, 2},
			{time.Second, "a", "allow", false, 2, 2},
			{time.Second, "c", fail, false, 2, 2}, // evicts a, which failed before b
			{time.Second, "a", "allow", true, 2, 2},
			{time.Second, "b", "allow", false, 2, 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := limits.NewHostBreaker(tc.cfg)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				desc := fmt.Sprintf("step %d (%v %s %v)", i, s.at, s.host, s.op)
				switch op := s.op.(type) {
				case string:
					got, name := false, "Allow"
					if op == "refuses" {
						got, name = h.Refuses(s.host, now), "Refuses"
					} else {
						got = h.Allow(s.host, now)
					}
					if got != s.want {
						t.Fatalf("%s: %s = %v, want %v", desc, name, got, s.want)
					}
				case limits.HostResult:
					h.Record(s.host, op, now)
				}
				if got := h.Skipped(); got != s.skipped {
					t.Fatalf("%s: Skipped = %d, want %d", desc, got, s.skipped)
				}
				if got := h.Tracked(); got != s.tracked {
					t.Fatalf("%s: Tracked = %d, want %d", desc, got, s.tracked)
				}
			}
		})
	}
}

// Hosts are client-supplied: however many fail, at most MaxHosts are remembered.
func TestHostBreakerStaysBounded(t *testing.T) {
	h := limits.NewHostBreaker(limits.HostBreakerConfig{Failures: 1, MaxHosts: 100})
	for i := range 10_000 {
		h.Record(fmt.Sprintf("h%d:443", i), limits.TransportFailed, t0.Add(time.Duration(i)))
	}
	if got := h.Tracked(); got != 100 {
		t.Fatalf("Tracked = %d, want MaxHosts 100", got)
	}
	if got := h.Skipped(); got != 100 {
		t.Fatalf("Skipped = %d, want 100", got)
	}
	if !h.Allow("h9899:443", t0) || h.Allow("h9900:443", t0) {
		t.Fatal("want the 100 most recently failing hosts kept and the older ones forgotten")
	}
}
