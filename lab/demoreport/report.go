// Package demoreport renders what a demo run measured (per-provider throughput over time, the
// injected fault, every circuit breaker's state and the outcome mix per provider) as one page a
// person can open from disk, and the same chart as a PNG for places that cannot show HTML.
//
// Both renderers draw from one layout (see chart.go), so the PNG and the SVG inside the page show
// the same lines, shading and strips at the same coordinates. The package does no I/O: it returns
// bytes, and the caller decides where they go.
//
// The page is self-contained on purpose: it is read from a CI artifact or a laptop without
// network, so it carries its CSS and SVG inline and references no script, font or image.
package demoreport

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Series is one provider's throughput over the run.
type Series struct {
	Provider string    // "fcm", "autopush", "apple", "wns", "fallback"
	Rate     []float64 // accepted+answered sends per second in bucket i: [i*Step, (i+1)*Step) from the start
}

// Window is a stretch of the run, such as the time a fault was injected.
type Window struct {
	From, To time.Duration // offsets from the start of the run; To == 0 means "until the end"
	Label    string        // e.g. "fault: autopush stall"
}

// BreakerSpan is a time during which one provider's circuit breaker stayed in one state.
// As with [Window], To == 0 means the state lasted until the end of the run.
type BreakerSpan struct {
	Provider string
	State    string        // "closed", "open", "half-open"
	From, To time.Duration // offsets from start
}

// ProviderSummary is what one provider answered over the whole run.
type ProviderSummary struct {
	Provider string
	Outcomes map[string]int // taxonomy code ("ACCEPTED", "TIMEOUT", "PROVIDER_UNAVAILABLE", "CIRCUIT_OPEN", "GONE", "EXPIRED", ...) -> count
	P50, P99 time.Duration  // enqueue -> answer
	Sent     int
}

// Report is everything one demo run measured.
type Report struct {
	Title     string
	Generated time.Time
	Setup     []string      // lines describing the run (redis used, rate, duration, fault)
	Step      time.Duration // bucket width of Series.Rate
	Duration  time.Duration // length of the run
	Series    []Series
	Fault     Window // zero value: no fault
	Breakers  []BreakerSpan
	Providers []ProviderSummary
}

// ErrInvalid is wrapped by every error HTML and PNG return: the Report cannot be drawn as given.
var ErrInvalid = errors.New("demoreport: invalid report")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// maxRate bounds a rate far above anything a gateway sends, so that a unit mistake (bytes for
// messages, a counter instead of a rate) is reported instead of overflowing the axis arithmetic.
const maxRate = 1e12

// validate rejects what would otherwise be drawn as something it is not: a negative or unknown
// rate would be plotted as a real measurement, a negative count would skew every percentage of
// its row, and rates without a bucket width have no place on the time axis. Everything else,
// including an empty report, renders.
func validate(r Report) error {
	if r.Step < 0 {
		return invalid("negative Step %v", r.Step)
	}
	if r.Duration < 0 {
		return invalid("negative Duration %v", r.Duration)
	}
	for _, s := range r.Series {
		if len(s.Rate) > 0 && r.Step == 0 {
			return invalid("series %q has rates but Step is zero", s.Provider)
		}
		for i, v := range s.Rate {
			if math.IsNaN(v) || v < 0 || v > maxRate {
				return invalid("series %q bucket %d: rate %v is not between 0 and %g", s.Provider, i, v, maxRate)
			}
		}
	}
	if err := checkSpan(r.Fault.From, r.Fault.To); err != nil {
		return invalid("fault window: %v", err)
	}
	for _, b := range r.Breakers {
		if err := checkSpan(b.From, b.To); err != nil {
			return invalid("breaker span %q %q: %v", b.Provider, b.State, err)
		}
	}
	for _, p := range r.Providers {
		for _, code := range slices.Sorted(maps.Keys(p.Outcomes)) {
			if n := p.Outcomes[code]; n < 0 {
				return invalid("provider %q: negative count %d for %s", p.Provider, n, code)
			}
		}
	}
	return nil
}

func checkSpan(from, to time.Duration) error {
	switch {
	case from < 0 || to < 0:
		return fmt.Errorf("negative offset (from %v, to %v)", from, to)
	case to != 0 && to < from:
		return fmt.Errorf("ends at %v before it starts at %v", to, from)
	}
	return nil
}

// hasFault reports whether the report describes a fault; the zero Window means there was none.
func (r Report) hasFault() bool { return r.Fault != Window{} }

// extent is the length of the time axis: the run's Duration, stretched if a series has buckets
// past it (a final partial bucket), and one second when there is nothing to measure, so that an
// empty report still gets a drawable axis.
func (r Report) extent() time.Duration {
	end := r.Duration
	for _, s := range r.Series {
		end = max(end, time.Duration(len(s.Rate))*r.Step)
	}
	if end <= 0 {
		return time.Second
	}
	return end
}

// providers lists every provider the report mentions, in the order the caller gave them (the
// series first, then the summaries, then providers known only from their breaker), so that the
// legend, the breaker rows and the tables line up.
func (r Report) providers() []string {
	var ids []string
	add := func(id string) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, s := range r.Series {
		add(s.Provider)
	}
	for _, p := range r.Providers {
		add(p.Provider)
	}
	for _, b := range r.Breakers {
		add(b.Provider)
	}
	return ids
}
