package limits

import (
	"math"
	"time"
)

// Accessors the tests of package limits_test read; the gateway itself has no use for them.

// Skipped is the number of hosts open now (skipped, or waiting for their next probe).
func (h *HostBreaker) Skipped() int { skipped, _ := h.counts(); return skipped }

// Tracked is the number of hosts with unanswered transport failures, at most MaxHosts.
func (h *HostBreaker) Tracked() int { _, tracked := h.counts(); return tracked }

func (h *HostBreaker) counts() (skipped, tracked int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.skipped, h.hosts.Len()
}

// RetryCap is the number of slots retries may hold: ceil(Cap*RetryShare), at least 1.
func (s *Slots) RetryCap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retryCap
}

// State is host's breaker state at now; an untracked host is Closed.
func (h *HostLimits) State(host string, now time.Time) State { st, _ := h.look(host, now); return st }

// Rate is host's own rate in force at now, in requests a second: +Inf while it has none (only
// the lane's bucket applies), as Bucket.Rate reports no limit.
func (h *HostLimits) Rate(host string, now time.Time) float64 { _, r := h.look(host, now); return r }

func (h *HostLimits) look(host string, now time.Time) (State, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, _ := h.hosts.Peek(host)
	if s == nil {
		return Closed, math.Inf(1)
	}
	h.advance(s, now)
	if s.bucket == nil {
		return s.state, math.Inf(1)
	}
	return s.state, s.bucket.Rate()
}
