package dispatch

import "time"

// Backoff is the retry policy for retryable outcomes (RATE_LIMITED, PROVIDER_DOWN,
// TRANSPORT_ERROR, CIRCUIT_OPEN): full jitter over a ceiling that starts at Base and doubles per
// retry up to Cap, at most MaxRetries retries after the first attempt.
type Backoff struct {
	// Base is the first retry's ceiling (Config: DefaultRetryBase).
	Base time.Duration
	// Cap bounds the ceiling (Config: DefaultRetryCap). It bounds our own backoff only: a Retry-After the
	// service sends may be longer and is honoured (taxonomy caps it at 24 h).
	Cap time.Duration
	// MaxRetries is how many retries follow the first attempt (the worker's is
	// DefaultMaxRetries, 9 sends in all); 0, none: a retryable outcome goes to the dead stream
	// at once.
	MaxRetries int
}

// verdict is what follows a retryable outcome.
type verdict int

const (
	// retryLater: put the job in the delayed set, due at the returned time.
	retryLater verdict = iota
	// retriesExhausted: the job used its last attempt; it goes to dead.
	retriesExhausted
	// retryExpired: the next attempt would be due when the job's TTL has run out, so it is
	// EXPIRED now instead of waiting in the delayed set for nothing.
	retryExpired
)

func (v verdict) String() string {
	switch v {
	case retryLater:
		return "retry"
	case retriesExhausted:
		return "exhausted"
	case retryExpired:
		return "expired"
	}
	return "verdict(?)"
}

// next decides what follows a retryable outcome of attempt (0 is the first send), given the
// service's Retry-After (0 for none), the TTL that remains at now, and rnd, a draw in [0, 1)
// that picks the jittered delay. It is a pure function so that every branch is table-tested
// with a fixed draw.
//
// Full jitter (a uniform delay in [0, ceiling]) spreads the retries of a burst that failed
// together, so a provider coming back up is not hit by all of them in the same instant.
// A Retry-After longer than the jittered delay wins: the service said when it can take more.
// A retry due at or after the TTL's end could only be sent with TTL 0 or not at all, so the
// job is EXPIRED at once rather than parked.
func (b Backoff) next(now time.Time, attempt int, retryAfter, remaining time.Duration, rnd float64) (time.Time, verdict) {
	if attempt >= b.MaxRetries {
		return time.Time{}, retriesExhausted
	}
	delay := time.Duration(clamp01(rnd) * float64(b.ceiling(attempt)))
	if retryAfter > delay {
		delay = retryAfter
	}
	if delay >= remaining {
		return time.Time{}, retryExpired
	}
	return now.Add(delay), retryLater
}

// ceiling is the largest delay after attempt failed: Base doubled attempt times, at most Cap.
// It doubles step by step instead of shifting so that a large attempt cannot overflow.
func (b Backoff) ceiling(attempt int) time.Duration {
	c := b.Base
	for i := 0; i < attempt && c < b.Cap; i++ {
		c *= 2
	}
	return min(c, b.Cap)
}

func clamp01(f float64) float64 {
	switch {
	case f < 0 || f != f: // NaN counts as 0: a broken source must not produce a huge delay
		return 0
	case f > 1:
		return 1
	}
	return f
}
