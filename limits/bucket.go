package limits

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

const (
	// throttleFloor: a throttled rate never falls below configured/throttleFloor, so a provider
	// that keeps answering 429 still gets enough requests through to notice its recovery.
	throttleFloor = 64
	// recoverQuiet: Recover does nothing until this long after the last Throttle.
	recoverQuiet = time.Second
	// recoverStep: while no throttling is seen, the rate climbs by configured/recoverStep a second.
	recoverStep = 10
)

// Bucket is a token bucket for one provider's request rate. It wraps x/time/rate with the clock
// passed in, and remembers the configured rate so a throttled provider's rate can be cut and
// later restored without losing the operator's figure (AIMD: Throttle halves the rate, Recover
// climbs back additively).
type Bucket struct {
	lim *rate.Limiter // has its own lock; its limit is only set with mu held

	mu           sync.Mutex
	configured   rate.Limit // guarded by mu
	lastThrottle time.Time  // guarded by mu; zero: never throttled
	lastRecover  time.Time  // guarded by mu; zero: never recovered
	// raised is closed, and replaced, when Configure raises the rate in force: a reservation
	// made at the lower rate is due later than the new rate would make it, and its waiter
	// reserves again (Raised).
	raised chan struct{} // guarded by mu
}

// NewBucket returns a bucket of perSecond tokens a second and the given burst. perSecond <= 0
// means no limit.
func NewBucket(perSecond float64, burst int) *Bucket {
	l := limitOf(perSecond)
	if burst < 1 {
		burst = 1
	}
	return &Bucket{lim: rate.NewLimiter(l, burst), configured: l, raised: make(chan struct{})}
}

// Raised is closed when Configure next raises the rate in force. A caller waiting on a
// reservation takes the channel before it reserves, and on its close cancels the reservation
// and reserves again, so a reload that raises a low rate applies to the waits already begun.
func (b *Bucket) Raised() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.raised
}

func limitOf(perSecond float64) rate.Limit {
	if perSecond <= 0 {
		return rate.Inf
	}
	return rate.Limit(perSecond)
}

// Allow reports whether a request may go at now, taking a token when it may.
func (b *Bucket) Allow(now time.Time) bool { return b.lim.AllowN(now, 1) }

// Delay reserves a token at now and returns how long the caller must wait before using it.
// A caller that will not wait must call Cancel on the returned reservation.
func (b *Bucket) Delay(now time.Time) (time.Duration, *rate.Reservation) {
	r := b.lim.ReserveN(now, 1)
	return r.DelayFrom(now), r
}

// Wait blocks until a token is available or ctx is done. It uses the wall clock: it is the entry
// point for production callers; tests use Allow and Delay with a stepped clock.
func (b *Bucket) Wait(ctx context.Context) error { return b.lim.Wait(ctx) }

// Tokens is how many tokens the bucket holds at now: negative while reservations wait for
// tokens not yet added. A caller that must leave tokens to others (a provider's bulk jobs,
// which go only with what transactional jobs leave) looks before it reserves.
func (b *Bucket) Tokens(now time.Time) float64 { return b.lim.TokensAt(now) }

// Burst is the bucket's size in force now.
func (b *Bucket) Burst() int { return b.lim.Burst() }

// Rate is the rate in force now.
func (b *Bucket) Rate() float64 { return float64(b.lim.Limit()) }

// Configured is the rate the bucket was created or last configured with.
func (b *Bucket) Configured() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.configured)
}

// SetRate changes the rate in force at now without changing the configured rate. It never
// raises the rate above the configured one. Recover climbs back from it, counting from now.
func (b *Bucket) SetRate(now time.Time, perSecond float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lim.SetLimitAt(now, min(rate.Limit(perSecond), b.configured))
	b.lastRecover = now
}

// Configure sets a new configured rate and burst at now (a registry reload, or this replica's
// share of the fleet rate changing). A throttled bucket stays throttled by the same fraction,
// so a change in the replica count does not undo a provider's 429s; an unthrottled one takes
// the new rate.
func (b *Bucket) Configure(now time.Time, perSecond float64, burst int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := limitOf(perSecond)
	if burst < 1 {
		burst = 1
	}
	cur, old := b.lim.Limit(), b.configured
	b.configured = l
	next := l
	if cur < old && old != rate.Inf && l != rate.Inf {
		next = max(l*cur/old, l/throttleFloor)
	}
	b.lim.SetLimitAt(now, next)
	b.lim.SetBurstAt(now, burst)
	if next > cur {
		close(b.raised)
		b.raised = make(chan struct{})
	}
}

// Throttle cuts the rate in force at now to half, but not below configured/64, and remembers
// now as the last throttle (a provider answered RATE_LIMITED). An unlimited bucket stays
// unlimited.
func (b *Bucket) Throttle(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastThrottle = now
	if b.configured == rate.Inf {
		return
	}
	b.lim.SetLimitAt(now, max(b.lim.Limit()/2, b.configured/throttleFloor))
}

// Recover raises the rate in force toward the configured one. It does nothing within 1s of the
// last Throttle; after that the rate climbs by configured/10 for every second since the later
// of the last Recover and the last Throttle, capped at the configured rate. Calling it about
// once a second is enough; the climb does not depend on how often it is called.
func (b *Bucket) Recover(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lastThrottle.IsZero() && now.Sub(b.lastThrottle) < recoverQuiet {
		return // still throttled: the baseline stays put so the quiet second is not lost
	}
	from := b.lastRecover
	if b.lastThrottle.After(from) {
		from = b.lastThrottle
	}
	b.lastRecover = now
	cur := b.lim.Limit()
	if cur >= b.configured || from.IsZero() {
		return
	}
	elapsed := now.Sub(from)
	if elapsed <= 0 {
		return
	}
	step := b.configured / recoverStep * rate.Limit(elapsed.Seconds())
	b.lim.SetLimitAt(now, min(cur+step, b.configured))
}
