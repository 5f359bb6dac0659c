package limits

import "time"

// maxSlices bounds how many slices a host's window has: Window/windowBuckets rounded down can
// need one slice more than windowBuckets to cover Window, as gobreaker rounds it up.
const maxSlices = windowBuckets + 1

// slicing is how a BreakerConfig's window is cut, the same way NewBreaker has gobreaker cut it:
// slices of Window/windowBuckets (at least minBucketPeriod), as many as cover Window.
type slicing struct {
	period time.Duration // one slice
	n      int64         // slices in the window, at most maxSlices
}

func slicingOf(c BreakerConfig) slicing {
	period := max(c.Window/windowBuckets, minBucketPeriod)
	return slicing{period: period, n: int64((c.Window + period - 1) / period)}
}

// span is the window's whole length: an outcome has left the window this long after its
// request started.
func (sl slicing) span() time.Duration { return time.Duration(sl.n) * sl.period }

// age is the slice t falls in, counted from origin; times before origin fall in the first.
func (sl slicing) age(origin, t time.Time) int64 {
	d := t.Sub(origin)
	if d <= 0 {
		return 0
	}
	return int64(d / sl.period)
}

// window is one host's rolling count of outcomes while its breaker is closed: each outcome
// counts in the slice its request started in, and a slice's counts leave the sums when the
// clock enters the slice n later, as gobreaker's rolling counts do.
type window struct {
	age       int64 // the slice the clock is in
	ok, fail  [maxSlices]uint32
	sumOK     uint32
	sumFailed uint32
}

// roll moves the window to slice age, dropping the slices that leave it.
func (w *window) roll(sl slicing, age int64) {
	if age <= w.age {
		return
	}
	if age-w.age >= sl.n {
		*w = window{age: age}
		return
	}
	for a := w.age + 1; a <= age; a++ {
		i := a % sl.n
		w.sumOK -= w.ok[i]
		w.sumFailed -= w.fail[i]
		w.ok[i], w.fail[i] = 0, 0
	}
	w.age = age
}

// add counts one outcome of a request that started in slice age; one that started before the
// window's oldest slice no longer counts.
func (w *window) add(sl slicing, age int64, failed bool) {
	age = min(age, w.age)
	if w.age-age >= sl.n {
		return
	}
	i := age % sl.n
	if failed {
		w.fail[i]++
		w.sumFailed++
	} else {
		w.ok[i]++
		w.sumOK++
	}
}

// tripped reports whether the window's outcomes open a breaker of c: at least MinSamples
// counted outcomes, failures at FailureRatio or above. Division is correctly rounded, so 8 of
// 20 reaches 0.4 exactly, as in NewBreaker's ReadyToTrip.
func (w *window) tripped(c BreakerConfig) bool {
	outcomes := w.sumOK + w.sumFailed
	return outcomes >= uint32(c.MinSamples) && float64(w.sumFailed)/float64(outcomes) >= c.FailureRatio
}

// setState moves s's breaker to state to at now: a new generation (so results of requests let
// through before are ignored), an empty window and no probes out. Called with h.mu held.
func (h *HostLimits) setState(s *trackedHost, to State, now time.Time) {
	from := s.state
	if from == to {
		return
	}
	switch {
	case from == Closed:
		h.open++
	case to == Closed:
		h.open--
	}
	s.state = to
	h.gen++
	s.gen = h.gen
	s.since = now
	s.win = window{}
	s.probesOut, s.probesOK = 0, 0
	if h.onChange != nil {
		h.onChange(s.key, from, to)
	}
}

// advanceBreaker brings s's breaker to now: a closed one rolls its window, an open one whose
// cooldown has passed turns half-open (strictly after the cooldown, as gobreaker does). Called
// with h.mu held.
func (h *HostLimits) advanceBreaker(s *trackedHost, now time.Time) {
	switch s.state {
	case Closed:
		s.win.roll(h.slices, h.slices.age(s.since, now))
	case Open:
		if now.Sub(s.since) > h.brk.Cooldown {
			h.setState(s, HalfOpen, now)
		}
	}
}

// openFor is the rest of an open breaker's cooldown at now: never 0 while it is open (the last
// instant reports 1ns, as Breaker.OpenFor), never more than the cooldown.
func (h *HostLimits) openFor(s *trackedHost, now time.Time) time.Duration {
	left := h.brk.Cooldown - now.Sub(s.since)
	return min(max(left, time.Nanosecond), h.brk.Cooldown)
}

// counts reports whether the outcome of p is one s's breaker counts now: p was let through in
// the breaker's current generation, or p was let through while the host was closed and before
// s was tracked, and s is still in its first, closed generation. A result from an earlier
// state (a slow failure from before the breaker opened) changes nothing.
func (s *trackedHost) counts(p *HostPermit) bool {
	return p.gen == s.gen || (p.closed && p.gen < s.firstGen && s.gen == s.firstGen)
}

// countResult applies the outcome r of p (already ended at now) to s's breaker. Called with
// h.mu held, after advanceBreaker.
func (h *HostLimits) countResult(s *trackedHost, p *HostPermit, r Result, now time.Time) {
	if !s.counts(p) {
		return
	}
	switch s.state {
	case Closed:
		if r == Excluded {
			return // counts neither way, not even toward MinSamples
		}
		s.win.add(h.slices, h.slices.age(s.since, p.at), r == Failure)
		if r == Failure && s.win.tripped(h.brk) {
			h.setState(s, Open, now)
		}
	case HalfOpen:
		switch r {
		case Excluded:
			s.probesOut-- // its place goes to another probe
		case Failure:
			h.setState(s, Open, now)
		default:
			s.probesOK++
			if s.probesOK >= h.brk.Probes {
				h.setState(s, Closed, now)
			}
		}
	}
}
