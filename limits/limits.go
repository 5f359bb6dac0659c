// Package limits holds the admission controls that keep one push service from taking the
// capacity another needs:
//
//   - Bucket: the request rate a push service meters (x/time/rate), cut multiplicatively on
//     throttling and recovered additively toward the configured rate;
//   - Slots: the requests one provider keeps in flight in this process, with a share for
//     retries and a cap per recipient (Semaphore is the plain cap it replaces);
//   - Breaker: the ratio breaker of one provider, on gobreaker/v2's two-step breaker with a
//     rolling window, half-open probes and excluded outcomes;
//   - HostBreaker: a consecutive-failure breaker for every host, bounded to MaxHosts.
//
// Every limit takes its time from the caller (a now argument) so tests step a clock instead of
// sleeping. Breaker is the exception: gobreaker reads time.Now itself, so its tests run in a
// testing/synctest bubble whose fake clock they step with time.Sleep.
package limits

import (
	"context"
	"errors"
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
