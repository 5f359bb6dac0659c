package limits

import (
	"math"
	"sync"
	"time"
)

// Tokens is a provider's request rate in one replica: a token bucket that its lanes take
// tokens from before they read (a lane reads no more entries than it can start now) and give
// back what they did not use (the read found fewer entries, or an entry had to wait). Bucket
// meters a host's throttled rate on x/time/rate; this one has to give tokens back exactly,
// which a rate.Reservation cannot once its moment has passed.
type Tokens struct {
	mu     sync.Mutex
	rate   float64   // guarded by mu; tokens a second, +Inf: no limit
	burst  float64   // guarded by mu; at least 1
	tokens float64   // guarded by mu; as of last
	last   time.Time // guarded by mu
	// raised is closed, and replaced, when Configure raises the rate: a lane waiting for a token
	// at the old rate looks again.
	raised chan struct{} // guarded by mu
}

// NewTokens returns a full bucket of perSecond tokens a second (<= 0: no limit) and burst (at
// least 1).
func NewTokens(perSecond float64, burst int) *Tokens {
	t := &Tokens{raised: make(chan struct{})}
	t.set(perSecond, burst)
	t.tokens = t.burst
	return t
}

func (t *Tokens) set(perSecond float64, burst int) {
	t.rate = perSecond
	if perSecond <= 0 {
		t.rate = math.Inf(1)
	}
	t.burst = float64(max(burst, 1))
}

// advance adds the tokens earned since last. Called with mu held.
func (t *Tokens) advance(now time.Time) {
	if now.After(t.last) {
		if !t.last.IsZero() {
			t.tokens = min(t.burst, t.tokens+t.rate*now.Sub(t.last).Seconds())
		}
		t.last = now
	}
}

// Take takes up to n whole tokens at now, keeping keep of them for others (a provider's bulk
// jobs leave a token for its next transactional one), and returns how many it took.
func (t *Tokens) Take(now time.Time, n, keep int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if math.IsInf(t.rate, 1) {
		return max(n, 0)
	}
	t.advance(now)
	k := max(0, min(n, int(math.Floor(t.tokens))-keep))
	t.tokens -= float64(k)
	return k
}

// Reserve takes the next token at now, whole or not, and says when it is due: now when the
// bucket holds one, else when the rate has earned it (the bucket is in debt until then, so the
// tokens earned while the caller waits are not lost to the burst's cap however late it wakes).
// A caller that does not use it gives it back with Return.
func (t *Tokens) Reserve(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if math.IsInf(t.rate, 1) {
		return now
	}
	t.advance(now)
	t.tokens--
	if t.tokens >= 0 {
		return now
	}
	return now.Add(time.Duration(math.Ceil(-t.tokens / t.rate * float64(time.Second))))
}

// Return gives back n tokens taken and not used.
func (t *Tokens) Return(now time.Time, n int) {
	if n <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	t.tokens = min(t.burst, t.tokens+float64(n))
}

// Until is how long after now the bucket holds n whole tokens (0: it does now); at most a
// minute for a very slow rate, after which the caller looks again.
func (t *Tokens) Until(now time.Time, n int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if math.IsInf(t.rate, 1) {
		return 0
	}
	t.advance(now)
	missing := min(float64(n), t.burst) - t.tokens
	if missing <= 0 {
		return 0
	}
	return min(time.Minute, time.Duration(math.Ceil(missing/t.rate*float64(time.Second))))
}

// Configure sets the rate and burst at now (a registry reload, or this replica's share of the
// fleet's rate changing); the tokens held stay, within the new burst.
func (t *Tokens) Configure(now time.Time, perSecond float64, burst int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	old := t.rate
	t.set(perSecond, burst)
	t.tokens = min(t.tokens, t.burst)
	if t.rate > old {
		close(t.raised)
		t.raised = make(chan struct{})
	}
}

// Raised is closed when Configure next raises the rate.
func (t *Tokens) Raised() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.raised
}

// Rate is the rate in force, +Inf for none.
func (t *Tokens) Rate() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rate
}

// Burst is the bucket's size.
func (t *Tokens) Burst() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int(t.burst)
}
