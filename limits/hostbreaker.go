package limits

import (
	"container/list"
	"strings"
	"sync"
	"time"
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
	key      string
	failures int       // consecutive transport failures
	skipped  bool      // failures reached Failures
	probeAt  time.Time // start of the current cooldown: when the host opened, then each probe
	elem     *list.Element
}

// HostBreaker is a consecutive-failure breaker for every host, our own code rather than one
// gobreaker per host: hosts are client-supplied, so the set must be bounded and evicted, and
// the clock is passed in. Keys are used as given; callers normalise them (case-folded
// host:port without a trailing dot, as providers.Route.Authority is). Safe for concurrent use.
type HostBreaker struct {
	cfg HostBreakerConfig // immutable after NewHostBreaker

	mu    sync.Mutex
	hosts map[string]*host // guarded by mu
	// byFail orders the tracked hosts by their last recorded transport failure, oldest at the
	// front: a failure moves its host to the back, eviction takes the front, both O(1).
	byFail  list.List // guarded by mu; values are *host
	skipped int       // guarded by mu; tracked hosts that are open
}

// NewHostBreaker returns a breaker that tracks no host yet.
func NewHostBreaker(c HostBreakerConfig) *HostBreaker {
	orDefault(&c.Failures, DefaultHostFailures)
	orDefault(&c.Cooldown, DefaultHostCooldown)
	orDefault(&c.MaxHosts, DefaultMaxHosts)
	return &HostBreaker{cfg: c, hosts: make(map[string]*host)}
}

// Allow reports whether a delivery to host may go at now. It is true for a host that is not
// skipped. For a skipped host it is false until Cooldown has passed since the host opened or
// since its last probe; then it lets this one delivery through as the probe and restarts the
// cooldown, so at most one probe per Cooldown reaches a dead host, whatever the probe's fate.
func (h *HostBreaker) Allow(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[key]
	if s == nil || !s.skipped {
		return true
	}
	if now.Sub(s.probeAt) < h.cfg.Cooldown {
		return false
	}
	s.probeAt = now
	return true
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
		if s := h.hosts[key]; s != nil {
			h.forget(s)
		}
		h.mu.Unlock()
	}
}

func (h *HostBreaker) fail(key string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.hosts[key]
	if s == nil {
		if len(h.hosts) >= h.cfg.MaxHosts {
			h.forget(h.byFail.Front().Value.(*host))
		}
		key = strings.Clone(key) // the caller's may be a substring of a whole job entry (HostLimits.track)
		s = &host{key: key}
		s.elem = h.byFail.PushBack(s)
		h.hosts[key] = s
	} else {
		h.byFail.MoveToBack(s.elem)
	}
	s.failures++
	if s.failures >= h.cfg.Failures && !s.skipped {
		s.skipped = true
		s.probeAt = now
		h.skipped++
	}
}

// forget drops s from the tracked hosts. Called with mu held.
func (h *HostBreaker) forget(s *host) {
	if s.skipped {
		h.skipped--
	}
	h.byFail.Remove(s.elem)
	delete(h.hosts, s.key)
}
