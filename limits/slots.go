package limits

import (
	"context"
	"errors"
	"math"
	"sync"
)

// Errors of Slots.Claim (and TryAcquire). Neither is an attempt nor a failure: a lane puts the
// job back to wait in Redis for a moment.
var (
	// ErrRetryShare: retries already hold their share of the slots; a first delivery may still go.
	ErrRetryShare = errors.New("limits: retries hold their share of the slots")
	// ErrRecipientBusy: this recipient already has PerRecipient deliveries in flight.
	ErrRecipientBusy = errors.New("limits: recipient has its share of the slots")
)

// SlotsConfig is the in-flight budget of one provider in one replica.
type SlotsConfig struct {
	Cap int // slots; < 1 is taken as 1
	// RetryShare in (0, 1]: retries may hold at most ceil(Cap*RetryShare) slots (at least 1), so
	// a retry storm cannot starve first deliveries. 0 (or out of range) means 0.5.
	RetryShare float64
	// PerRecipient caps one recipient's deliveries in flight; 0 (or less): no cap.
	PerRecipient int
}

// DefaultRetryShare is SlotsConfig.RetryShare's default; DefaultPerRecipient is the registry's
// per_recipient_in_flight when it gives none.
const (
	DefaultRetryShare   = 0.5
	DefaultPerRecipient = 8
)

// Slots is the in-flight budget of one provider in one replica: a cap, a share of it for
// retries, and a cap per recipient. Its cap can change while slots are held (budget
// reallocation). Safe for concurrent use.
type Slots struct {
	mu           sync.Mutex
	share        float64 // guarded by mu
	perRecipient int     // guarded by mu; 0 or less: no cap
	cap          int     // guarded by mu
	retryCap     int     // guarded by mu; ceil(cap*share), at least 1
	inFlight     int     // guarded by mu
	retries      int     // guarded by mu; of inFlight, the retries
	// byRecipient counts the deliveries in flight of every recipient that has some, capped or
	// not, so that Reconfigure may change the cap while they are out.
	byRecipient map[string]int // guarded by mu
	// freed is closed (and cleared) when a slot becomes free, to wake Wait. It is nil while
	// nobody waits, so Release allocates nothing on the hot path.
	freed chan struct{} // guarded by mu
}

// withDefaults gives the retries' share its default: a share outside (0, 1] is
// DefaultRetryShare.
func (c SlotsConfig) withDefaults() SlotsConfig {
	if c.RetryShare <= 0 || c.RetryShare > 1 {
		c.RetryShare = DefaultRetryShare
	}
	return c
}

// NewSlots returns slots with nothing in flight.
func NewSlots(c SlotsConfig) *Slots {
	c = c.withDefaults()
	s := &Slots{share: c.RetryShare, perRecipient: c.PerRecipient, byRecipient: make(map[string]int)}
	s.setCapLocked(c.Cap)
	return s
}

func (s *Slots) setCapLocked(n int) {
	if n < 1 {
		n = 1
	}
	s.cap = n
	// The epsilon keeps float error from rounding an exact product up: 10*0.3 is
	// 3.0000000000000004 in float64, and must give 3, not 4.
	s.retryCap = int(math.Ceil(float64(n)*s.share - 1e-9))
	if s.retryCap < 1 {
		s.retryCap = 1
	}
}

// Take takes up to n free slots at once and returns how many it took (0 when none is free): a
// lane takes the slots for what it is about to read before it reads, and then Claims one for
// each entry it starts and Puts back the rest.
func (s *Slots) Take(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := max(0, min(n, s.cap-s.inFlight))
	s.inFlight += k
	return k
}

// Claim makes one slot taken with Take a delivery's: a retry's (within the retries' share) and
// recipient's ("" is a job without recipient, which has no per-recipient cap). It returns
// ErrRetryShare when retry and retries hold their share, ErrRecipientBusy when the recipient
// has its cap; then the slot stays taken, and the caller Puts it back. A claimed slot is freed
// with Release(retry, recipient).
func (s *Slots) Claim(retry bool, recipient string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if retry && s.retries >= s.retryCap {
		return ErrRetryShare
	}
	if recipient != "" {
		n := s.byRecipient[recipient]
		if s.perRecipient > 0 && n >= s.perRecipient {
			return ErrRecipientBusy
		}
		s.byRecipient[recipient] = n + 1
	}
	if retry {
		s.retries++
	}
	return nil
}

// Put frees n slots taken with Take and never claimed.
func (s *Slots) Put(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight < n {
		panic("limits: Slots.Put of more than was taken")
	}
	s.inFlight -= n
	s.wakeLocked()
}

// TryAcquire takes and claims one slot for a delivery (Take and Claim). It returns
// ErrNoCapacity when every slot is taken, and Claim's errors, with the slot given back.
func (s *Slots) TryAcquire(retry bool, recipient string) error {
	if s.Take(1) == 0 {
		return ErrNoCapacity
	}
	if err := s.Claim(retry, recipient); err != nil {
		s.Put(1)
		return err
	}
	return nil
}

// Release frees a slot taken and claimed with the same retry and recipient. Releasing what
// was not taken is a bug in the caller and panics rather than silently raising the cap.
func (s *Slots) Release(retry bool, recipient string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight == 0 || (retry && s.retries == 0) {
		panic("limits: Slots.Release without TryAcquire")
	}
	if recipient != "" {
		switch n := s.byRecipient[recipient]; n {
		case 0:
			panic("limits: Slots.Release for a recipient with nothing in flight")
		case 1:
			delete(s.byRecipient, recipient) // keep the map to recipients in flight
		default:
			s.byRecipient[recipient] = n - 1
		}
	}
	s.inFlight--
	if retry {
		s.retries--
	}
	s.wakeLocked()
}

// wakeLocked wakes every Wait when a slot is free. Called with mu held.
func (s *Slots) wakeLocked() {
	if s.freed != nil && s.inFlight < s.cap {
		close(s.freed)
		s.freed = nil
	}
}

// SetCap changes the number of slots (budget reallocation; < 1 is taken as 1). Lowering it
// below InFlight takes nothing away: new acquisitions fail until enough slots are released.
func (s *Slots) SetCap(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setCapLocked(n)
	s.wakeLocked()
}

// Reconfigure applies c (a registry reload) to slots that may be in use: the cap as SetCap
// does, the retries' share and the per-recipient cap for the next acquisitions. Deliveries in
// flight keep their slots.
func (s *Slots) Reconfigure(c SlotsConfig) {
	c = c.withDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.share, s.perRecipient = c.RetryShare, c.PerRecipient
	s.setCapLocked(c.Cap)
	s.wakeLocked()
}

// Wait blocks until a slot is free or ctx is done, and returns ctx's error in the latter case.
// A free slot is not reserved: the caller still takes it with Take, which may lose a race.
func (s *Slots) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.inFlight < s.cap {
			s.mu.Unlock()
			return nil
		}
		if s.freed == nil {
			s.freed = make(chan struct{})
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Free is the number of slots not in use: how many jobs a lane may read now. 0 while a lowered
// cap is below InFlight.
func (s *Slots) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.cap-s.inFlight, 0)
}

// InFlight is the number of slots in use.
func (s *Slots) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// Cap is the number of slots.
func (s *Slots) Cap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cap
}
