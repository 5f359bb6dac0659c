// Package limits holds the per-provider admission controls that keep one push service from
// taking the capacity another needs: a token bucket for the request rate a push service meters,
// and a semaphore for the requests this process keeps in flight. Both take their time from the
// caller so tests step a clock instead of sleeping.
package limits

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrNoCapacity is returned by TryAcquire when every slot is taken.
var ErrNoCapacity = errors.New("limits: no free slot")

// Semaphore caps the requests in flight. The zero value is not usable; call NewSemaphore.
type Semaphore struct {
	slots chan struct{} // a token in the channel is a slot in use
}

// NewSemaphore returns a semaphore with n slots; n < 1 is taken as 1.
func NewSemaphore(n int) *Semaphore {
	if n < 1 {
		n = 1
	}
	return &Semaphore{slots: make(chan struct{}, n)}
}

// Acquire takes a slot, waiting until one is free or ctx is done.
func (s *Semaphore) Acquire(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case s.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryAcquire takes a slot when one is free and returns ErrNoCapacity otherwise.
func (s *Semaphore) TryAcquire() error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
		return ErrNoCapacity
	}
}

// Release frees a slot taken by Acquire or TryAcquire. Releasing more than was taken is a bug in
// the caller and panics rather than silently raising the cap.
func (s *Semaphore) Release() {
	select {
	case <-s.slots:
	default:
		panic("limits: Semaphore.Release without Acquire")
	}
}

// InFlight is the number of slots in use.
func (s *Semaphore) InFlight() int { return len(s.slots) }

// Free is the number of slots not in use: how many jobs a lane may read now.
func (s *Semaphore) Free() int { return cap(s.slots) - len(s.slots) }

// Cap is the number of slots.
func (s *Semaphore) Cap() int { return cap(s.slots) }

// Bucket is a token bucket for one provider's request rate. It wraps x/time/rate with the clock
// passed in, and remembers the configured rate so a throttled provider's rate can be cut and later
// restored without losing the operator's figure.
type Bucket struct {
	mu         sync.Mutex // guards configured; the limiter has its own lock
	lim        *rate.Limiter
	configured rate.Limit
}

// NewBucket returns a bucket of perSecond tokens a second and the given burst. perSecond <= 0
// means no limit.
func NewBucket(perSecond float64, burst int) *Bucket {
	l := rate.Limit(perSecond)
	if perSecond <= 0 {
		l = rate.Inf
	}
	if burst < 1 {
		burst = 1
	}
	return &Bucket{lim: rate.NewLimiter(l, burst), configured: l}
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

// Rate is the rate in force now.
func (b *Bucket) Rate() float64 { return float64(b.lim.Limit()) }

// Configured is the rate the bucket was created or last configured with.
func (b *Bucket) Configured() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.configured)
}

// SetRate changes the rate in force at now without changing the configured rate; used to slow
// a throttled provider. It never raises the rate above the configured one.
func (b *Bucket) SetRate(now time.Time, perSecond float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := rate.Limit(perSecond)
	if l > b.configured {
		l = b.configured
	}
	b.lim.SetLimitAt(now, l)
}

// Configure sets a new configured rate and burst at now (a registry reload, or a replica's
// share of the fleet rate changing).
func (b *Bucket) Configure(now time.Time, perSecond float64, burst int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := rate.Limit(perSecond)
	if perSecond <= 0 {
		l = rate.Inf
	}
	if burst < 1 {
		burst = 1
	}
	b.configured = l
	b.lim.SetLimitAt(now, l)
	b.lim.SetBurstAt(now, burst)
}
