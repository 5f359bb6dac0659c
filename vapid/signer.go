package vapid

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// headerSegment is the base64url JOSE header {"typ":"JWT","alg":"ES256"},
// byte for byte the one in RFC 8292's example. It is built by hand rather
// than by jwt.Token, which marshals a map and so orders the keys alg, typ.
var headerSegment = base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))

// claims is the VAPID claim set in RFC order. aud is a plain string: jwt/v5's
// RegisteredClaims would marshal it as a one-element array by default, a
// shape RFC 8292 does not show and push services need not accept.
type claims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// SignerOptions configure a Signer.
type SignerOptions struct {
	// Subject is the sub claim: a mailto: address or an https: URL a push service's operator
	// can reach (NewSigner refuses anything else, saying which rule failed). Required.
	Subject string
	// Lifetime is how far ahead exp is set; 0 means DefaultLifetime. It must
	// be in (0, MaxLifetime].
	Lifetime time.Duration
	// Now is the clock; nil means time.Now. Tests step a fake clock.
	Now func() time.Time
}

// Signer produces VAPID Authorization headers and caches them.
//
// Tokens are cached per (key name and public key, audience). A cached token
// is reused until it is within the refresh margin of its exp (RefreshBefore,
// or a quarter of the lifetime when that is shorter, so short lifetimes still
// cache), then re-signed. Goroutines that miss the same entry together wait
// for one signature: the first inserts an in-progress entry and signs without
// holding any lock, so signing for different audiences runs in parallel.
//
// The cache is bounded (audiences come from client-supplied endpoints): when
// it holds more than its limit, entries due for refresh and then the oldest are
// dropped. A Signer is safe for concurrent use.
type Signer struct {
	// Immutable after NewSigner.
	subject    string
	lifetime   time.Duration
	now        func() time.Time
	maxEntries int64
	signHook   func(aud string) // tests only: runs before each signature

	cache      sync.Map // cacheKey -> *entry; lock-free reads on the hot path
	entries    atomic.Int64
	evictMu    sync.Mutex // serialises evictions; never held while signing
	signatures atomic.Uint64
	byKey      sync.Map // key name -> *atomic.Uint64: the signatures made with each key
}

// defaultMaxEntries bounds the cache. At a few hundred bytes an entry this is
// tens of megabytes at worst, far more audiences than real push services.
const defaultMaxEntries = 1 << 16

type cacheKey struct {
	key string // Key.id: name and public key
	aud string
}

// entry is one cached token. Its fields are written once by the goroutine
// that created it, before done is closed; readers read them only after
// observing done closed.
type entry struct {
	done      chan struct{}
	header    string
	exp       time.Time // the token's exp
	refreshAt time.Time // exp minus the refresh margin
	err       error
}

func (e *entry) ready() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// fresh reports whether a ready entry can be sent at now by a caller whose
// lifetime is lifetime: signed successfully, not yet due for refresh, and not
// expiring later than the caller allows (a caller asking for a shorter
// lifetime, or a clock stepped back, gets a new token).
func (e *entry) fresh(now time.Time, lifetime time.Duration) bool {
	return e.err == nil && now.Before(e.refreshAt) && !e.exp.After(now.Add(lifetime))
}

// NewSigner validates the subject (and lower-cases its scheme) and lifetime.
func NewSigner(opts SignerOptions) (*Signer, error) {
	sub, err := normalizeSubject(opts.Subject)
	if err != nil {
		return nil, err
	}
	lifetime, err := pickLifetime(opts.Lifetime, DefaultLifetime)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Signer{subject: sub, lifetime: lifetime, now: now, maxEntries: defaultMaxEntries}, nil
}

func pickLifetime(d, def time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return def, nil
	case d < 0 || d > MaxLifetime:
		return 0, fmt.Errorf("%w: %v is outside (0, %v]", ErrBadLifetime, d, MaxLifetime)
	}
	return d, nil
}

// refreshMargin is RefreshBefore, or a quarter of a short lifetime.
func refreshMargin(lifetime time.Duration) time.Duration {
	return min(RefreshBefore, lifetime/4)
}

// Signatures is the number of JWTs signed so far.
func (s *Signer) Signatures() uint64 { return s.signatures.Load() }

// SignaturesByKey is the number of JWTs signed so far with each key, by key name (only keys that
// signed at least one).
func (s *Signer) SignaturesByKey() map[string]uint64 {
	out := map[string]uint64{}
	s.byKey.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// Header returns "vapid t=<jwt>, k=<public key>" for key and audience (an
// origin as returned by Audience). lifetime 0 means the signer's default;
// otherwise it must be in (0, MaxLifetime]. The token is cached: see Signer.
func (s *Signer) Header(key *Key, audience string, lifetime time.Duration) (string, error) {
	if key == nil || key.priv == nil {
		return "", errNilKey
	}
	lifetime, err := pickLifetime(lifetime, s.lifetime)
	if err != nil {
		return "", err
	}
	ck := cacheKey{key: key.id, aud: audience}
	for {
		now := s.now()
		v, ok := s.cache.Load(ck)
		if !ok {
			// Validate only on a miss: a hit was validated when inserted.
			if err := checkAudience(audience); err != nil {
				return "", err
			}
			e := &entry{done: make(chan struct{})}
			if _, loaded := s.cache.LoadOrStore(ck, e); loaded {
				continue // another goroutine inserted first; use its entry
			}
			if s.entries.Add(1) > s.maxEntries {
				s.evict(now)
			}
			return s.fill(ck, e, key, lifetime, now)
		}
		e := v.(*entry)
		if !e.ready() {
			<-e.done
			if e.err != nil {
				return "", e.err // share the signer's failure, like singleflight
			}
			continue // re-check freshness against a fresh clock reading
		}
		if e.fresh(now, lifetime) {
			return e.header, nil
		}
		ne := &entry{done: make(chan struct{})}
		if !s.cache.CompareAndSwap(ck, e, ne) {
			continue // someone else is already replacing (or dropped) it
		}
		return s.fill(ck, ne, key, lifetime, now)
	}
}

// fill signs the token for an entry this goroutine inserted, publishes it and
// wakes the waiters. On failure (or a panic) the entry is removed so the next
// call retries, and waiters get the error.
func (s *Signer) fill(ck cacheKey, e *entry, key *Key, lifetime time.Duration, now time.Time) (string, error) {
	defer func() {
		if e.header == "" {
			if e.err == nil {
				e.err = fmt.Errorf("%w: signing panicked", ErrBadKey)
			}
			if s.cache.CompareAndDelete(ck, e) {
				s.entries.Add(-1)
			}
		}
		close(e.done)
	}()
	if s.signHook != nil {
		s.signHook(ck.aud)
	}
	exp := time.Unix(now.Add(lifetime).Unix(), 0) // whole seconds, never after now+lifetime
	token, err := sign(key, claims{Aud: ck.aud, Exp: exp.Unix(), Sub: s.subject})
	if err != nil {
		e.err = err
		return "", err
	}
	s.signatures.Add(1)
	n, _ := s.byKey.LoadOrStore(key.name, new(atomic.Uint64))
	n.(*atomic.Uint64).Add(1)
	e.exp = exp
	e.refreshAt = exp.Add(-refreshMargin(lifetime))
	e.header = "vapid t=" + token + ", k=" + key.public
	return e.header, nil
}

// sign makes the compact JWS with jwt/v5's ES256 (raw r||s, 64 bytes).
func sign(key *Key, c claims) (string, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("vapid: marshal claims: %w", err)
	}
	signing := headerSegment + "." + base64.RawURLEncoding.EncodeToString(body)
	sig, err := jwt.SigningMethodES256.Sign(signing, key.priv)
	if err != nil {
		return "", fmt.Errorf("%w: %q: ES256 sign: %v", ErrBadKey, key.name, err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// evict brings the cache back under its bound: first entries that can no
// longer be sent (due for refresh or failed), then the oldest by exp, down to
// 15/16 of the limit so the sweep runs once per many inserts. Entries still
// being signed are left alone: goroutines are waiting on them.
func (s *Signer) evict(now time.Time) {
	s.evictMu.Lock()
	defer s.evictMu.Unlock()
	if s.entries.Load() <= s.maxEntries {
		return // another goroutine evicted while we waited
	}
	type item struct {
		k cacheKey
		e *entry
	}
	var live []item
	s.cache.Range(func(k, v any) bool {
		ck, e := k.(cacheKey), v.(*entry)
		if !e.ready() {
			return true
		}
		if e.err != nil || !now.Before(e.refreshAt) {
			if s.cache.CompareAndDelete(ck, e) {
				s.entries.Add(-1)
			}
			return true
		}
		live = append(live, item{ck, e})
		return true
	})
	target := s.maxEntries - s.maxEntries/16
	excess := s.entries.Load() - target
	if excess <= 0 {
		return
	}
	// Oldest first: the earliest exp was signed longest ago.
	slices.SortFunc(live, func(a, b item) int { return a.e.exp.Compare(b.e.exp) })
	for _, it := range live {
		if excess <= 0 {
			break
		}
		if s.cache.CompareAndDelete(it.k, it.e) {
			s.entries.Add(-1)
			excess--
		}
	}
}
