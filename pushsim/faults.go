package pushsim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// FaultKind is what a provider does wrong.
type FaultKind int

const (
	// None: the provider behaves.
	None FaultKind = iota
	// Stall holds the request without answering until the client gives up or the server closes:
	// the provider that accepts connections and then hangs.
	Stall
	// Fail answers Status (default 503) in the provider's shape: Autopush's 503 is errno 201 with
	// Retry-After: 120.
	Fail
	// Throttle answers the provider's rate-limit shape with Retry-After: 429 (FCM, Apple,
	// generic), 406 (WNS), 503 errno 201 (Autopush has no 429 path).
	Throttle
	// Reset drops the request without an answer. On HTTP/1.1 the TCP connection is closed
	// (hijacked, SO_LINGER 0, so the client sees a reset); on HTTP/2 only the stream is reset
	// (RST_STREAM INTERNAL_ERROR, by panic(http.ErrAbortHandler)) and the connection lives on.
	Reset
	// Slow answers normally after Delay.
	Slow
	// Echo answers Status (default 404) with a plain-text body that quotes the request's path
	// and query ("no such subscription /wpush/v2/gAAAA..."), as some services' error pages do.
	// The path is the subscription's credential: a sender must keep it out of what it records.
	Echo
)

var faultNames = [...]string{None: "none", Stall: "stall", Fail: "fail", Throttle: "throttle", Reset: "reset", Slow: "slow", Echo: "echo"}

func (k FaultKind) String() string {
	if k >= 0 && int(k) < len(faultNames) {
		return faultNames[k]
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the kind's name ("stall").
func (k FaultKind) MarshalText() ([]byte, error) {
	if k < 0 || int(k) >= len(faultNames) {
		return nil, fmt.Errorf("%w: kind %d (one of %s)", ErrFault, int(k), strings.Join(faultNames[:], ", "))
	}
	return []byte(faultNames[k]), nil
}

// UnmarshalText reads a kind's name; "" is None.
func (k *FaultKind) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*k = None
		return nil
	}
	for i, n := range faultNames {
		if n == string(b) {
			*k = FaultKind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown kind %q (one of %s)", ErrFault, b, strings.Join(faultNames[:], ", "))
}

// Fault is a misbehaviour injected into one provider.
type Fault struct {
	Kind FaultKind
	// Ratio is the share of requests hit, drawn from Config.Seed's source; 0 (or 1) hits every
	// request.
	Ratio float64
	// Status is the status a Fail answers, 400-599; 0 means 503 (404 for an Echo).
	Status int
	// RetryAfter, when set, is sent as Retry-After (whole seconds) by Fail, Echo and Throttle. A
	// Throttle without it keeps the fixture's Retry-After, or sends 30 s if the fixture has none.
	RetryAfter time.Duration
	// Delay is how long Slow waits before answering.
	Delay time.Duration
}

// defaultThrottleRetryAfter is the Retry-After of a Throttle when neither the fault nor the
// provider's fixture gives one.
const defaultThrottleRetryAfter = 30 * time.Second

func (f Fault) validate() error {
	switch {
	case f.Kind < None || f.Kind > Echo:
		return fmt.Errorf("%w: kind %d (one of %s)", ErrFault, int(f.Kind), strings.Join(faultNames[:], ", "))
	case f.Ratio < 0 || f.Ratio > 1 || f.Ratio != f.Ratio:
		return fmt.Errorf("%w: ratio %v outside [0, 1] (the share of requests hit; 0 or 1: every request)", ErrFault, f.Ratio)
	case f.Status != 0 && (f.Status < 400 || f.Status > 599):
		return fmt.Errorf("%w: status %d outside 400-599 (0: 503 for fail, 404 for echo)", ErrFault, f.Status)
	case f.RetryAfter < 0:
		return fmt.Errorf("%w: retry_after %v is negative (0 or more; 0: none)", ErrFault, f.RetryAfter)
	case f.Delay < 0:
		return fmt.Errorf("%w: delay %v is negative (0 or more)", ErrFault, f.Delay)
	case f.Kind == Slow && f.Delay == 0:
		return fmt.Errorf("%w: slow needs a delay (seconds, or a duration string like \"250ms\")", ErrFault)
	}
	return nil
}

// faultTable holds the fault of each provider, the faults of single hosts, and the seeded
// source that decides which requests a ratio hits.
type faultTable struct {
	mu     sync.Mutex
	faults map[string]Fault // guarded by mu; by provider, absent means None
	hosts  map[string]Fault // guarded by mu; by canonical host, which wins over its provider's
	// keys are the faults of single senders: by application server key (the VAPID header's k,
	// base64url without padding), which win over the host's and the provider's.
	keys map[string]Fault // guarded by mu
	rng  *rand.Rand       // guarded by mu
}

func newFaultTable(seed uint64) *faultTable {
	return &faultTable{faults: map[string]Fault{}, hosts: map[string]Fault{}, keys: map[string]Fault{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// SetHostFault injects f into the requests for one host only (any provider's, case and a
// trailing dot ignored, ":443" implied), over the fault of its provider: for two self-hosted
// services behind the generic provider, one failing while the other is healthy. A Fault with
// Kind None clears it.
func (s *Server) SetHostFault(host string, f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	t := s.faults
	t.mu.Lock()
	defer t.mu.Unlock()
	h := canonicalHost(host)
	if f.Kind == None {
		delete(t.hosts, h)
	} else {
		t.hosts[h] = f
	}
	return nil
}

// SetKeyFault injects f into the requests signed with one application server key only
// (base64url, padded or not; the k of the request's VAPID header), whatever their provider or
// host, over the faults of both: a push service that throttles one sender (a VAPID key) while
// the others go through, as Chrome's per-sender limits do. A Fault with Kind None clears it.
func (s *Server) SetKeyFault(applicationServerKey string, f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	k := strings.TrimRight(applicationServerKey, "=")
	if k == "" {
		return fmt.Errorf("%w: empty application server key", ErrFault)
	}
	t := s.faults
	t.mu.Lock()
	defer t.mu.Unlock()
	if f.Kind == None {
		delete(t.keys, k)
	} else {
		t.keys[k] = f
	}
	return nil
}

// SetFault injects f into provider; provider "" or "*" means every provider, and a Fault with
// Kind None clears it.
func (s *Server) SetFault(provider string, f Fault) error {
	targets := []string{provider}
	if provider == "" || provider == "*" {
		targets = Providers()
	} else if !validProvider(provider) {
		return fmt.Errorf("%w %q (one of %s, or \"*\" for every one)", ErrProvider, provider, strings.Join(Providers(), ", "))
	}
	if err := f.validate(); err != nil {
		return err
	}
	t := s.faults
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range targets {
		if f.Kind == None {
			delete(t.faults, p)
		} else {
			t.faults[p] = f
		}
	}
	return nil
}

// Faults returns the fault of every provider that has one.
func (s *Server) Faults() map[string]Fault {
	t := s.faults
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Fault, len(t.faults))
	for p, f := range t.faults {
		out[p] = f
	}
	return out
}

func (t *faultTable) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.faults)
	clear(t.hosts)
	clear(t.keys)
}

// draw returns the fault of this request's sender (key, the VAPID header's k; "" for none), or
// else of its host, or else of its provider, and whether it hits this request.
func (t *faultTable) draw(provider, host, key string) (Fault, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.keys[strings.TrimRight(key, "=")]
	if !ok || key == "" {
		f, ok = t.hosts[host]
	}
	if !ok {
		f, ok = t.faults[provider]
	}
	if !ok {
		return Fault{}, false
	}
	if f.Ratio == 0 || f.Ratio == 1 {
		return f, true
	}
	return f, t.rng.Float64() < f.Ratio
}

// faultAnswer is the answer of a Fail or Throttle at provider.
func faultAnswer(provider string, f Fault) answer {
	if f.Kind == Throttle {
		a := fromFixture(fixtures.MustGet(provider, throttleFixture[provider]))
		ra := f.RetryAfter
		if ra == 0 {
			if _, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil {
				return a
			}
			ra = defaultThrottleRetryAfter
		}
		return a.withHeader("Retry-After", retryAfterSeconds(ra.Seconds()))
	}
	status := f.Status
	if status == 0 {
		status = 503
	}
	a := statusAnswer(provider, status)
	if f.RetryAfter > 0 {
		a = a.withHeader("Retry-After", retryAfterSeconds(f.RetryAfter.Seconds()))
	}
	return a
}

// echoAnswer is the answer of an Echo to a request for requestURI (its path and query).
func echoAnswer(provider string, f Fault, requestURI string) answer {
	status := f.Status
	if status == 0 {
		status = http.StatusNotFound
	}
	a := fromShape(provider, plain(status, "no such subscription "+requestURI+"\n", plainCode(status)))
	a.name = "echo"
	if f.RetryAfter > 0 {
		a = a.withHeader("Retry-After", retryAfterSeconds(f.RetryAfter.Seconds()))
	}
	return a
}
