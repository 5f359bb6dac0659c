package telemetry

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Readiness check names Health treats specially; the caller names its other checks (for
// example "registry" and "groups").
const (
	// RedisCheck is fed by RedisChecked: ok while its last success is recent.
	RedisCheck = "redis"
	// DrainingCheck fails for good once Draining is called.
	DrainingCheck = "draining"
)

// DefaultRedisFreshness is how long a successful background Redis check keeps the RedisCheck
// ok, unless SetRedisFreshness says otherwise.
const DefaultRedisFreshness = 30 * time.Second

// Health is the worker's liveness (its loops keep ticking) and readiness (its named checks are
// ok), which the Server serves at /livez and /readyz. Neither ever calls Redis: the caller
// reports what its own loops found. A nil *Health is valid: it registers nothing and reports
// live and ready. Safe for concurrent use.
type Health struct {
	now func() time.Time // immutable after NewHealth

	mu         sync.Mutex
	beats      map[*Beat]struct{}     // registered loops; guarded by mu
	order      []string               // check names in the order first set; guarded by mu
	checks     map[string]checkResult // guarded by mu
	redis      bool                   // RedisCheck is RedisChecked's; guarded by mu
	freshness  time.Duration          // guarded by mu
	redisGood  time.Time              // last successful Redis check; guarded by mu
	redisErr   error                  // the last Redis check's error (nil after a success); guarded by mu
	redisErrAt time.Time              // guarded by mu
	draining   bool                   // guarded by mu
}

type checkResult struct {
	ok     bool
	reason string
}

// NewHealth returns a Health reading time from now (time.Now when nil), with no loops and no
// checks.
func NewHealth(now func() time.Time) *Health {
	if now == nil {
		now = time.Now
	}
	return &Health{
		now:       now,
		beats:     make(map[*Beat]struct{}),
		checks:    make(map[string]checkResult),
		freshness: DefaultRedisFreshness,
	}
}

// Beat is one loop's heartbeat for /livez, from Health.Loop. A nil *Beat is valid and does
// nothing.
type Beat struct {
	h      *Health       // immutable
	name   string        // immutable
	within time.Duration // immutable
	last   time.Time     // guarded by h.mu
}

// Loop registers a loop that promises to Tick at least once every within; /livez fails while
// any registered loop has not. The bound starts now. within must be positive.
func (h *Health) Loop(name string, within time.Duration) *Beat {
	if h == nil {
		return nil
	}
	if within <= 0 {
		panic(fmt.Sprintf("telemetry: Health.Loop(%q): the bound %v is not positive", name, within))
	}
	b := &Beat{h: h, name: name, within: within}
	h.mu.Lock()
	defer h.mu.Unlock()
	b.last = h.now()
	h.beats[b] = struct{}{}
	return b
}

// Tick records a round of the loop.
func (b *Beat) Tick() {
	if b == nil {
		return
	}
	now := b.h.now()
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	b.last = now
}

// Done unregisters the loop: it ended on purpose (shutdown) and is no longer watched.
func (b *Beat) Done() {
	if b == nil {
		return
	}
	b.h.mu.Lock()
	defer b.h.mu.Unlock()
	delete(b.h.beats, b)
}

// SetReady sets the readiness check named check; /readyz is 200 only while every check set so
// far is ok. reason says why a check is not ok (it is shown by /readyz). Setting DrainingCheck
// ok after Draining has no effect, and once RedisChecked or SetRedisFreshness was called the
// RedisCheck follows them alone.
func (h *Health) SetReady(check string, ok bool, reason string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addCheck(check)
	h.checks[check] = checkResult{ok: ok, reason: reason}
}

// RedisChecked takes the result of the background Redis check made at time at. The RedisCheck
// is ok while the last success is within the freshness bound (DefaultRedisFreshness, or
// SetRedisFreshness) of now.
func (h *Health) RedisChecked(at time.Time, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trackRedis()
	if err != nil {
		h.redisErr, h.redisErrAt = err, at
		return
	}
	h.redisErr = nil
	if at.After(h.redisGood) {
		h.redisGood = at
	}
}

// SetRedisFreshness sets how long a successful Redis check keeps the RedisCheck ok, and adds
// the check (not ok until the first success) if RedisChecked has not yet.
func (h *Health) SetRedisFreshness(d time.Duration) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.trackRedis()
	h.freshness = d
}

// Draining turns readiness off for good: shutdown began.
func (h *Health) Draining() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addCheck(DrainingCheck)
	h.draining = true
}

// trackRedis makes RedisCheck RedisChecked's. h.mu is held.
func (h *Health) trackRedis() {
	h.addCheck(RedisCheck)
	h.redis = true
}

// addCheck records the order of check names. h.mu is held.
func (h *Health) addCheck(name string) {
	for _, n := range h.order {
		if n == name {
			return
		}
	}
	h.order = append(h.order, name)
}

// checkState is one readiness check as /readyz shows it.
type checkState struct {
	name   string
	ok     bool
	reason string
}

// readiness evaluates every check now, in the order they were first set.
func (h *Health) readiness() []checkState {
	if h == nil {
		return nil
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]checkState, 0, len(h.order))
	for _, name := range h.order {
		var s checkState
		switch {
		case name == DrainingCheck && h.draining:
			s = checkState{name: name, reason: "shutting down"}
		case name == RedisCheck && h.redis:
			s = h.redisState(now)
		default:
			c := h.checks[name]
			s = checkState{name: name, ok: c.ok, reason: c.reason}
		}
		if !s.ok && s.reason == "" {
			s.reason = "not ok"
		}
		out = append(out, s)
	}
	return out
}

// redisState is the RedisCheck at now. h.mu is held.
func (h *Health) redisState(now time.Time) checkState {
	s := checkState{name: RedisCheck}
	switch {
	case !h.redisGood.IsZero() && now.Sub(h.redisGood) <= h.freshness:
		s.ok = true
	case h.redisGood.IsZero() && h.redisErr == nil:
		s.reason = "no check has succeeded yet"
	case h.redisGood.IsZero():
		s.reason = fmt.Sprintf("no check has succeeded yet; the last failed %s ago: %v", since(now, h.redisErrAt), h.redisErr)
	case h.redisErr != nil:
		s.reason = fmt.Sprintf("last success %s ago (bound %s); the last check failed: %v", since(now, h.redisGood), h.freshness, h.redisErr)
	default:
		s.reason = fmt.Sprintf("last success %s ago (bound %s)", since(now, h.redisGood), h.freshness)
	}
	return s
}

// loopState is one registered loop as /livez shows it.
type loopState struct {
	name          string
	ok            bool
	since, within time.Duration // time since its last tick, and its bound
}

// loops lists the registered loops at now, sorted by name.
func (h *Health) loops() []loopState {
	if h == nil {
		return nil
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]loopState, 0, len(h.beats))
	for b := range h.beats {
		d := now.Sub(b.last)
		out = append(out, loopState{name: b.name, ok: d <= b.within, since: d, within: b.within})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// since is now-t for a message, to the millisecond.
func since(now, t time.Time) string {
	return now.Sub(t).Round(time.Millisecond).String()
}

// oneLine keeps a reason on one line of a response.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
