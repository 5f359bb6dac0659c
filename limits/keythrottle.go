package limits

import (
	"sort"
	"sync"
	"time"
)

// KeyThrottleConfig configures a KeyThrottle.
type KeyThrottleConfig struct {
	// Base is how long a sender pauses after a RATE_LIMITED answer without a Retry-After; each
	// such answer in a row doubles it, up to Max. Zero means one second.
	Base time.Duration
	// Max bounds that doubling. Zero means one minute.
	Max time.Duration
	// MaxKeys bounds the senders tracked; a sender past it is never paused (a pause it asked
	// for is dropped). The worker's keys come from its flags, so the bound is never reached in
	// practice. Zero means 1024.
	MaxKeys int
}

// KeyThrottle is one provider's throttle of its senders (VAPID key names): a push service that
// answers RATE_LIMITED to one sender pauses that sender only, for the Retry-After it asked (or a
// pause of Base doubling per answer in a row when it gave none), while the provider's other
// senders go on. A pause may also come from elsewhere (Park: another replica learnt it). Safe
// for concurrent use.
type KeyThrottle struct {
	cfg  KeyThrottleConfig // immutable
	mu   sync.Mutex
	keys map[string]*keyState // guarded by mu
}

type keyState struct {
	until   time.Time // paused before this
	strikes int       // RATE_LIMITED answers in a row without a Retry-After
	reason  string
}

// KeyState is one paused sender, as KeyThrottle.Paused reports it.
type KeyState struct {
	Key    string
	Until  time.Time
	Reason string
}

// NewKeyThrottle returns a throttle with no sender paused.
func NewKeyThrottle(cfg KeyThrottleConfig) *KeyThrottle {
	if cfg.Base <= 0 {
		cfg.Base = time.Second
	}
	if cfg.Max <= 0 {
		cfg.Max = time.Minute
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 1024
	}
	return &KeyThrottle{cfg: cfg, keys: make(map[string]*keyState)}
}

// Wait is how long key is still paused at now: 0 when it may send.
func (k *KeyThrottle) Wait(key string, now time.Time) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st := k.keys[key]; st != nil && now.Before(st.until) {
		return st.until.Sub(now)
	}
	return 0
}

// Limited records a RATE_LIMITED answer to key at now with the service's Retry-After (0 for
// none) and returns the end of the pause it starts. A pause only grows: an answer with a
// shorter Retry-After than the pause in force (one that was in flight when the pause began)
// leaves it as it is.
func (k *KeyThrottle) Limited(key string, now time.Time, retryAfter time.Duration, reason string) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.state(key)
	if st == nil {
		return now
	}
	d := retryAfter
	if d <= 0 {
		d = k.cfg.Base
		for i := 0; i < st.strikes && d < k.cfg.Max; i++ {
			d *= 2
		}
		d = min(d, k.cfg.Max)
		st.strikes++
	}
	if until := now.Add(d); until.After(st.until) {
		st.until, st.reason = until, reason
	}
	return st.until
}

// Answered records an answer other than RATE_LIMITED to key: the next pause without a
// Retry-After starts from Base again. A pause in force stays.
func (k *KeyThrottle) Answered(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st := k.keys[key]; st != nil {
		st.strikes = 0
	}
}

// Park pauses key until until (a pause another replica learnt), unless a longer one is in force.
func (k *KeyThrottle) Park(key string, until time.Time, reason string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st := k.state(key); st != nil && until.After(st.until) {
		st.until, st.reason = until, reason
	}
}

// Paused lists the senders paused at now, by key; it forgets the senders whose pause has ended
// and who have no strikes.
func (k *KeyThrottle) Paused(now time.Time) []KeyState {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []KeyState
	for name, st := range k.keys {
		switch {
		case now.Before(st.until):
			out = append(out, KeyState{Key: name, Until: st.until, Reason: st.reason})
		case st.strikes == 0:
			delete(k.keys, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// state is key's state, made on first use; nil past MaxKeys. k.mu is held.
func (k *KeyThrottle) state(key string) *keyState {
	st := k.keys[key]
	if st == nil {
		if len(k.keys) >= k.cfg.MaxKeys {
			return nil
		}
		st = &keyState{}
		k.keys[key] = st
	}
	return st
}
