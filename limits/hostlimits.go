package limits

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// ErrPaused is returned by HostLimits.Admit while a host's Retry-After pause lasts.
var ErrPaused = errors.New("limits: host paused by its Retry-After")

// HostLimitsConfig is the per-host guard of a lane whose hosts are client-supplied. Zero
// fields take the documented defaults.
type HostLimitsConfig struct {
	// Breaker is every host's ratio breaker, with BreakerConfig's meaning and defaults.
	Breaker BreakerConfig
	// Rate and Burst are the bucket a throttled host starts from, in requests a second: the
	// lane's per-replica rate and burst. A host's first RATE_LIMITED answer halves Rate for that
	// host. Rate <= 0 means no limit, and then a RATE_LIMITED answer has no rate to cut (as with
	// Bucket.Throttle); Burst < 1 means 1.
	Rate  float64
	Burst int
	// MaxHosts is how many hosts are tracked at most; < 1 means 4096, as in HostBreakerConfig.
	MaxHosts int
	// OnChange, when not nil, is called on every transition of a host's breaker, and with to
	// Closed when a host whose breaker is not closed is forgotten to make room. It runs with the
	// HostLimits' lock held: it must only count (a metric, a log line handed on) and return, and
	// must not call back into the HostLimits.
	OnChange func(host string, from, to State)
}

// HostLimits gives each host of one lane a ratio breaker and a 429 throttle of its own, so that
// one client-supplied host answering 5xx or 429 neither pauses nor slows the lane's other hosts.
//
// What is per provider and what is per host, in the lane that uses HostLimits (the fallback
// lane, whose hosts no registry entry lists):
//
//   - Per provider, shared by every host of the lane in this replica: the in-flight slots
//     (Slots: max_in_flight or the budget's share, retry_share, per_recipient_in_flight) and the
//     token bucket (Bucket: this replica's share of rate and burst), which is not throttled;
//     and the part of both that the hosts not yet seen answering share (see ProvenHosts).
//   - Per host (host:port, case-folded, no trailing dot), through HostLimits: the ratio breaker,
//     with the provider's breaker settings (failure_ratio, window, min_samples, cooldown,
//     probes); the 429 throttle, which halves that host's own rate on every RATE_LIMITED
//     answer, starting from the lane's per-replica rate and down to 1/64 of it, and once a
//     second has passed without one climbs back by a tenth of it for every second since the
//     last, until the host has no rate of its own again; and the host's Retry-After, which
//     holds that host's requests until it has passed. An unthrottled host has no rate of its
//     own: only the lane's bucket meters it.
//   - Per host, through HostBreaker: the consecutive-transport-failure breaker of host_breaker
//     (failures, cooldown, max_hosts).
//
// At most MaxHosts hosts (host_breaker.max_hosts) are tracked. A host is tracked from its first
// failure, RATE_LIMITED answer or Retry-After; a host that only ever succeeds is never tracked
// and costs a map lookup in Admit and another in Done. When the table is full, the host whose last failure is
// the oldest is forgotten first, open or throttled as it may be; a host that is closed,
// unthrottled and without a failure for a whole window is forgotten as soon as it is next seen.
// Because a host's window starts at its first failure, successes before it do not dilute the
// ratio: a host's breaker may open on a little less than the provider's breaker would need.
//
// Each tracked host's ratio breaker is a Breaker, gobreaker's rolling window, so a host's
// breaker is the provider's to the letter: outcomes count in the slice their request started
// in, excluded outcomes count neither way, the breaker opens once MinSamples outcomes are in
// the window and failures reach FailureRatio, stays open for Cooldown, then lets Probes
// requests through and closes only when every one succeeds; a result from before the last
// change of state is ignored. A request let through before its host was tracked counts in the
// first slice of the host's breaker, as the request that had it tracked does. Like Breaker, the
// breakers read time.Now themselves (an open breaker's wait is Breaker.OpenFor); the throttle,
// the pause and forgetting a host go by the caller's now. Safe for concurrent use.
type HostLimits struct {
	// Immutable after NewHostLimits.
	brk      BreakerConfig
	span     time.Duration // how long an outcome stays in a breaker's window
	onChange func(host string, from, to State)

	mu sync.Mutex
	// hosts is bounded to MaxHosts and forgets the least recently failing host first: only a
	// failure, a RATE_LIMITED answer or a Retry-After counts as use (Get), every other look is
	// a Peek, so a host's admissions and successes do not keep it in the table. Its eviction
	// callback, which Remove runs too, is forget. Guarded by mu, under which a host's lookup,
	// insert and counts change in one step.
	hosts     *simplelru.LRU[string, *trackedHost]
	lastID    uint64     // guarded by mu; the id of the host tracked last
	rate      rate.Limit // guarded by mu; a throttled host's configured rate
	burst     int        // guarded by mu
	open      int        // guarded by mu; tracked hosts whose breaker is not closed
	throttled int        // guarded by mu; tracked hosts with a rate or a pause of their own
}

// trackedHost is one host with a failure or a throttle to remember. Every field is guarded by
// the HostLimits' mu.
type trackedHost struct {
	key      string
	lastFail time.Time // last failure, RATE_LIMITED answer or Retry-After

	// id is unique across hosts and time: HostLimits.lastID when the host was tracked.
	id  uint64
	brk *Breaker
	// state is brk's state as its last transition left it, which the counts of HostLimits
	// follow.
	state State
	// early reports the outcome of a request let through before the host was tracked into the
	// first slice of brk's first, closed generation (later ones ignore it).
	early func(error)

	bucket      *Bucket   // nil while the host has no rate of its own
	pausedUntil time.Time // zero: no Retry-After pause
	throttled   bool      // bucket or pause, as counted in HostLimits.throttled
}

// NewHostLimits returns a guard that tracks no host yet.
func NewHostLimits(c HostLimitsConfig) *HostLimits {
	brk := c.Breaker.withDefaults()
	orDefault(&c.MaxHosts, DefaultMaxHosts)
	h := &HostLimits{
		brk: brk, span: brk.span(), onChange: c.OnChange,
		rate: limitOf(c.Rate), burst: max(1, c.Burst),
	}
	// NewLRU fails only for a size < 1, which orDefault rules out.
	h.hosts, _ = simplelru.NewLRU(c.MaxHosts, func(_ string, s *trackedHost) { h.forget(s) })
	return h
}

// HostPermit is one request to a host that HostLimits.Admit let through. The caller must end it:
// Done after the request was sent, Cancel when nothing was sent. Only the first end counts, so
// a deferred Cancel is a safe catch-all for the paths that send nothing; a copy of a permit is
// ended on its own, so end the variable Admit returned. Ending the zero HostPermit does
// nothing. A permit never ended keeps a half-open probe's place, as with Breaker.Allow.
type HostPermit struct {
	h      *HostLimits
	key    string
	id     uint64            // the tracked host's id at Admit; untracked: the last id handed out
	report func(error)       // the host's breaker's (see Breaker.allow); nil when untracked
	res    *rate.Reservation // the host's own token; nil when unthrottled
	closed bool              // let through while the host's breaker was closed or untracked
	ended  bool
}

// Admit asks at now to send one request to host (used as given: callers normalise it, as
// providers.Route.Authority is). It never blocks.
//
// With a nil error the request may go once wait has passed: wait is 0 unless the host is
// throttled, and then it is how long until the host's own token, which Admit has reserved.
// The caller ends the permit with Done once it has sent the request, or with Cancel if it sends
// nothing, which gives back the token and a half-open probe's place; a caller that will not
// hold a slot for wait cancels and asks again after it.
//
// Otherwise the permit is the zero one and the request must not go now:
//   - ErrOpen: the host's breaker is open, and wait is the rest of its cooldown (never 0); or
//     it is half-open with every probe out, and wait is 0, as when a probe returns is not
//     known (or what is left of a Retry-After pause, if longer);
//   - ErrPaused: the host asked for a pause with Retry-After, and wait is what is left of it.
func (h *HostLimits) Admit(host string, now time.Time) (p HostPermit, wait time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, _ := h.hosts.Peek(host)
	if s != nil {
		h.advance(s, now)
		if h.forgettable(s, now) {
			h.hosts.Remove(s.key)
			s = nil
		}
	}
	if s == nil {
		return HostPermit{h: h, key: host, id: h.lastID, closed: true}, 0, nil
	}
	paused := max(s.pausedUntil.Sub(now), 0)
	switch {
	case s.state == Open:
		return HostPermit{}, max(s.brk.OpenFor(), paused), ErrOpen
	case s.state == HalfOpen && s.brk.probesFull():
		return HostPermit{}, paused, ErrOpen
	case paused > 0:
		return HostPermit{}, paused, ErrPaused
	}
	closed := s.state == Closed
	report, err := s.brk.allow()
	if err != nil {
		// Only an open breaker refuses, and an open one became half-open at most since.
		return HostPermit{}, paused, ErrOpen
	}
	p = HostPermit{h: h, key: host, id: s.id, report: report, closed: closed}
	if s.bucket != nil {
		wait, p.res = s.bucket.Delay(now)
	}
	return p, wait, nil
}

// Done reports at now the outcome of the request p let through: r for the host's breaker
// (Success, Failure or Excluded as with Breaker; any other value is Excluded), rateLimited when
// the host answered RATE_LIMITED (429), which throttles it, and retryAfter when the host asked
// with Retry-After not to be sent anything for that long (0: it did not). An Excluded outcome
// ends p as Cancel does. Failure, rateLimited and retryAfter each start
// tracking an untracked host; a Success of an untracked host changes nothing.
func (p *HostPermit) Done(now time.Time, r Result, rateLimited bool, retryAfter time.Duration) {
	if p.h == nil || p.ended {
		return
	}
	p.ended = true
	p.h.record(p, now, r, rateLimited, retryAfter)
}

// Cancel ends p without a request sent: it counts neither way, frees a half-open probe's place
// and gives back the host's token if its time has not come yet (a token waited out is spent).
func (p *HostPermit) Cancel(now time.Time) { p.Done(now, Excluded, false, 0) }

func (h *HostLimits) record(p *HostPermit, now time.Time, r Result, rateLimited bool, retryAfter time.Duration) {
	if r != Success && r != Failure {
		r = Excluded
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r == Excluded && p.res != nil {
		p.res.CancelAt(now)
	}
	hurt := r == Failure || rateLimited || retryAfter > 0
	var s *trackedHost
	if hurt {
		s, _ = h.hosts.Get(p.key) // makes a tracked host the most recently failing
	} else {
		s, _ = h.hosts.Peek(p.key)
	}
	switch {
	case s != nil:
		h.advance(s, now)
		if hurt {
			s.lastFail = now
		}
	case hurt:
		s = h.track(p.key, now)
	default:
		return // a healthy host is never tracked
	}
	h.countResult(s, p, r)
	if rateLimited {
		h.throttle(s, now)
	}
	if retryAfter > 0 && now.Add(retryAfter).After(s.pausedUntil) {
		s.pausedUntil = now.Add(retryAfter)
		h.setThrottled(s, true)
	}
	if !hurt && h.forgettable(s, now) {
		h.hosts.Remove(s.key)
	}
}

// track starts tracking host at now, closed, forgetting the least recently failing host first
// when the table is full. Called with mu held.
func (h *HostLimits) track(host string, now time.Time) *trackedHost {
	h.lastID++
	// A copy of the name: the caller's may be a substring of a whole job entry, which the table
	// would otherwise keep alive for as long as it remembers the host.
	host = strings.Clone(host)
	s := &trackedHost{key: host, lastFail: now, id: h.lastID, state: Closed}
	s.brk = NewBreaker(host, h.brk, func(_ string, from, to State) { h.changed(s, from, to) })
	s.early, _ = s.brk.allow() // a closed breaker lets every request through
	h.hosts.Add(host, s)       // a full table forgets its least recently failing host
	return s
}

// forget is the table's eviction callback, run with mu held whenever s leaves it (Remove, or
// evicted to make room): s's breaker and throttle leave the counts, and a host whose breaker is
// not closed is reported closed, so a gauge kept from the transitions stays right.
func (h *HostLimits) forget(s *trackedHost) {
	if s.state != Closed {
		h.open--
		if h.onChange != nil {
			h.onChange(s.key, s.state, Closed)
		}
	}
	h.setThrottled(s, false)
}

// forgettable reports whether s has nothing left to remember at now: its breaker is closed,
// it has no rate or pause of its own, and its last failure has left the window. Called with mu
// held, after advance.
func (h *HostLimits) forgettable(s *trackedHost, now time.Time) bool {
	return s.state == Closed && !s.throttled && now.Sub(s.lastFail) >= h.span
}

// advance brings s to now: its breaker (a closed one rolls its window, an open one whose
// cooldown has passed turns half-open), the end of its pause, and its rate's recovery; a rate
// back at the configured one is dropped, so the host has none of its own. Called with mu held.
func (h *HostLimits) advance(s *trackedHost, now time.Time) {
	s.brk.State()
	if !s.pausedUntil.IsZero() && !now.Before(s.pausedUntil) {
		s.pausedUntil = time.Time{}
	}
	if s.bucket != nil {
		s.bucket.Recover(now)
		if s.bucket.Rate() >= s.bucket.Configured() {
			s.bucket = nil
		}
	}
	h.setThrottled(s, s.bucket != nil || !s.pausedUntil.IsZero())
}

// throttle cuts s's own rate at now (a RATE_LIMITED answer): the first time from the
// configured rate, with an empty bucket, so the next request waits a token of the halved rate.
// Called with mu held.
func (h *HostLimits) throttle(s *trackedHost, now time.Time) {
	if h.rate == rate.Inf {
		return // no rate to cut
	}
	if s.bucket == nil {
		s.bucket = NewBucket(float64(h.rate), h.burst)
		s.bucket.lim.AllowN(now, h.burst)
	}
	s.bucket.Throttle(now)
	h.setThrottled(s, true)
}

// changed follows a transition of s's breaker: its state, the count of hosts not closed, and
// OnChange. The breaker calls it under its own lock, from a call HostLimits makes with mu held.
func (h *HostLimits) changed(s *trackedHost, from, to State) {
	s.state = to
	switch {
	case from == Closed:
		h.open++
	case to == Closed:
		h.open--
	}
	if h.onChange != nil {
		h.onChange(s.key, from, to)
	}
}

// countResult reports the outcome r of p to s's breaker. p's own report when p was let through
// by this breaker; the breaker's first slice when p was let through while the host was closed
// or untracked, before s was tracked (the breaker ignores it once it has changed state); and
// nothing otherwise. Called with mu held, after advance.
func (h *HostLimits) countResult(s *trackedHost, p *HostPermit, r Result) {
	switch {
	case p.report != nil && p.id == s.id:
		p.report(outcomeErr(r))
	case p.closed && p.id < s.id:
		s.early(outcomeErr(r))
	}
}

// setThrottled records whether s has a rate or a pause of its own. Called with mu held.
func (h *HostLimits) setThrottled(s *trackedHost, on bool) {
	if s.throttled == on {
		return
	}
	s.throttled = on
	if on {
		h.throttled++
	} else {
		h.throttled--
	}
}

// Configure sets at now the rate and burst a throttled host is configured with (the lane's
// per-replica share changed, or the registry was reloaded). A host throttled already stays
// throttled by the same fraction of the new rate, as with Bucket.Configure.
func (h *HostLimits) Configure(now time.Time, perSecond float64, burst int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rate, h.burst = limitOf(perSecond), max(1, burst)
	for _, s := range h.hosts.Values() {
		if s.bucket == nil {
			continue
		}
		if h.rate == rate.Inf {
			s.bucket = nil
			h.setThrottled(s, !s.pausedUntil.IsZero())
			continue
		}
		s.bucket.Configure(now, float64(h.rate), h.burst)
	}
}

// HostStats are the counts of a HostLimits, for metrics.
type HostStats struct {
	Tracked   int // hosts tracked, at most MaxHosts
	Open      int // tracked hosts whose breaker is open or half-open
	Throttled int // tracked hosts with a rate or a Retry-After pause of their own
}

// Stats are the counts now. A host's state is brought up to date when it is next used (Admit,
// Done) or by Expire, so a pause or a failure whose time has passed counts until then.
func (h *HostLimits) Stats() HostStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HostStats{Tracked: h.hosts.Len(), Open: h.open, Throttled: h.throttled}
}

// Expire brings every tracked host up to now and forgets those with nothing left to remember,
// as Admit does for the host it is asked about, so that Stats counts no host whose pause or
// failures are over when no job came for it since. It walks at most MaxHosts hosts.
func (h *HostLimits) Expire(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.hosts.Values() { // a copy: Remove changes the table
		h.advance(s, now)
		if h.forgettable(s, now) {
			h.hosts.Remove(s.key)
		}
	}
}
