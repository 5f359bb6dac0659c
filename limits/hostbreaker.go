package limits

import (
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// HostBreakerConfig is the breaker every host gets. Zero fields take the defaults below.
type HostBreakerConfig struct {
	Failures int           // consecutive transport failures that open a host; DefaultHostFailures
	Cooldown time.Duration // a skipped host gets one probe per Cooldown; DefaultHostCooldown
	MaxHosts int           // hosts tracked at most; DefaultMaxHosts
}

// The defaults of HostBreakerConfig's zero fields (HostLimitsConfig.MaxHosts too).
const (
	DefaultHostFailures = 3
	DefaultHostCooldown = 300 * time.Second
	DefaultMaxHosts     = 4096
)

// HostResult is what one delivery learned about a host.
type HostResult int

// The outcomes a caller reports to a HostBreaker.
const (
	TransportFailed HostResult = iota // DNS, connect, TLS or timeout: the host did not answer
	Answered                          // any HTTP answer, 5xx and 429 included: the host is reachable
	NotSent                           // refused before sending: says nothing about the host
)

// host is one tracked host: only hosts with at least one unanswered transport failure are
// tracked, so the map holds at most MaxHosts suspects, never every host seen.
type host struct {
	failures int       // consecutive transport failures
	skipped  bool      // failures reached Failures
	probeAt  time.Time // start of the current cooldown: when the host opened, then each probe
}

// HostBreaker is a consecutive-failure breaker for every host, our own code rather than one
// gobreaker per host: hosts are client-supplied, so the set must be bounded and evicted, and
// the clock is passed in. Keys are used as given; callers normalise them (case-folded
// host:port without a trailing dot, as providers.Route.Authority is). Safe for concurrent use.
type HostBreaker struct {
	cfg HostBreakerConfig // immutable after NewHostBreaker

	mu sync.Mutex
	// hosts is bounded to MaxHosts and forgets the least recently failing host first: only a
	// transport failure counts as use (Get), every other look is a Peek, so an Allow or a probe
	// does not keep a dead host in the table. Its eviction callback, which Remove runs too,
	// keeps skipped. Guarded by mu, under which a failure's lookup, insert and count are one step.
	hosts   *simplelru.LRU[string, *host]
	skipped int // guarded by mu; tracked hosts that are open
}

// NewHostBreaker returns a breaker that tracks no host yet.
func NewHostBreaker(c HostBreakerConfig) *HostBreaker {
	orDefault(&c.Failures, DefaultHostFailures)
	orDefault(&c.Cooldown, DefaultHostCooldown)
	orDefault(&c.MaxHosts, DefaultMaxHosts)
	h := &HostBreaker{cfg: c}
	// NewLRU fails only for a size < 1, which orDefault rules out.
	h.hosts, _ = simplelru.NewLRU(c.MaxHosts, func(_ string, s *host) {
		if s.skipped {
			h.skipped--
		}
	})
	return h
}

// Allow reports whether a delivery to host may go at now. It is true for a host that is not
// skipped. For a skipped host it is false until Cooldown has passed since the host opened or
// since its last probe; then it lets this one delivery through as the probe and restarts the
// cooldown, so at most one probe per Cooldown reaches a dead host, whatever the probe's fate.
func (h *HostBreaker) Allow(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.hosts.Peek(key)
	if !ok || !s.skipped {
		return true
	}
	if now.Sub(s.probeAt) < h.cfg.Cooldown {
		return false
	}
	s.probeAt = now
	return true
}

// Refuses reports whether Allow would refuse a delivery to host at now, without taking the
// probe Allow would give: a caller that must claim more before its send (a place in a pool)
// asks it first, so that a skipped host's deliveries claim nothing.
func (h *HostBreaker) Refuses(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.hosts.Peek(key)
	return ok && s.skipped && now.Sub(s.probeAt) < h.cfg.Cooldown
}

// Record reports the result of a delivery to host at now. TransportFailed counts a
// consecutive failure and opens the host at Failures; Answered forgets the host (closed,
// count reset); NotSent changes nothing.
func (h *HostBreaker) Record(key string, r HostResult, now time.Time) {
	switch r {
	case TransportFailed:
		h.fail(key, now)
	case Answered:
		h.mu.Lock()
		h.hosts.Remove(key)
		h.mu.Unlock()
	}
}

func (h *HostBreaker) fail(key string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.hosts.Get(key) // a failure makes the host the most recently failing
	if !ok {
		s = &host{}
		// A full table forgets its least recently failing host. The key is a copy: the
		// caller's may be a substring of a whole job entry (HostLimits.track).
		h.hosts.Add(strings.Clone(key), s)
	}
	s.failures++
	if s.failures >= h.cfg.Failures && !s.skipped {
		s.skipped = true
		s.probeAt = now
		h.skipped++
	}
}
