package limits

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerConfig is the ratio breaker of one provider. Zero fields take the Default* values below,
// those of the shipped registry.yaml, so a zero config is a sane breaker, not an always-open or
// never-open one.
type BreakerConfig struct {
	FailureRatio float64       // open when failures/(successes+failures) in Window reaches this, (0, 1]
	Window       time.Duration // rolling window the ratio is computed over
	MinSamples   int           // counted outcomes (excluded ones are not) needed in Window before the ratio counts
	Cooldown     time.Duration // how long the breaker stays open before probing
	Probes       int           // requests let through half-open; all must succeed to close
}

// The defaults of BreakerConfig's zero fields.
const (
	DefaultFailureRatio = 0.5
	DefaultWindow       = 30 * time.Second
	DefaultMinSamples   = 20
	DefaultCooldown     = 15 * time.Second
	DefaultProbes       = 3

	// windowBuckets is how many slices the rolling window is cut into: a failure leaves the
	// window between Window-Window/10 and Window after its request started.
	windowBuckets = 10
	// minBucketPeriod keeps a very short window from rolling a bucket on every request.
	minBucketPeriod = 100 * time.Millisecond
)

// bucketPeriod is one slice of the rolling window: Window/windowBuckets, at least
// minBucketPeriod.
func (c BreakerConfig) bucketPeriod() time.Duration {
	return max(c.Window/windowBuckets, minBucketPeriod)
}

// span is the rolling window's whole length as gobreaker keeps it, Window rounded up to whole
// slices: an outcome has left the window this long after its request started.
func (c BreakerConfig) span() time.Duration {
	period := c.bucketPeriod()
	return (c.Window + period - 1) / period * period
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	orDefault(&c.FailureRatio, DefaultFailureRatio)
	c.FailureRatio = min(c.FailureRatio, 1)
	orDefault(&c.Window, DefaultWindow)
	orDefault(&c.MinSamples, DefaultMinSamples)
	orDefault(&c.Cooldown, DefaultCooldown)
	orDefault(&c.Probes, DefaultProbes)
	return c
}

// State is the state of a Breaker.
type State int

// The states of a breaker. Their order follows gobreaker's, but they are mapped explicitly.
const (
	Closed   State = iota // requests flow; outcomes are counted
	HalfOpen              // cooldown over: Probes requests test the provider
	Open                  // requests are refused until the cooldown ends
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	default:
		return fmt.Sprintf("State(%d)", int(s))
	}
}

// Result is the outcome of one request let through by a Breaker.
type Result int

// The outcomes a caller reports. Any other value is taken as Excluded: a caller bug must not
// open or close a breaker.
const (
	Success  Result = iota // a round trip the provider handled (2xx, and 4xx such as 404/410)
	Failure                // the provider is unwell: 5xx, 429, transport error
	Excluded               // nothing was sent: counts neither way, not even toward MinSamples
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	case Excluded:
		return "excluded"
	default:
		return fmt.Sprintf("Result(%d)", int(r))
	}
}

// ErrOpen is returned by Breaker.Allow while the breaker is open, or half-open with every
// probe already out.
var ErrOpen = errors.New("limits: circuit open")

// gobreaker's two-step API reports outcomes as errors; these carry our Results through it.
var (
	errFailure  = errors.New("limits: failure")
	errExcluded = errors.New("limits: excluded")
)

// Breaker is the ratio breaker of one provider, on gobreaker/v2's TwoStepCircuitBreaker with
// a rolling window. gobreaker reads time.Now itself; tests step it inside a testing/synctest
// bubble. Safe for concurrent use.
type Breaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	cooldown time.Duration // immutable after NewBreaker
	probes   uint32        // immutable after NewBreaker
	// openedAt is when the breaker last opened, written by the state hook under gobreaker's
	// mutex and read lock-free by OpenFor.
	openedAt atomic.Pointer[time.Time]
	// tripped is the failures and outcomes (failures<<32 | outcomes) of the window that last
	// opened the breaker, for the line that says why.
	tripped atomic.Uint64
}

// NewBreaker returns a closed breaker. onChange, when not nil, is called on every transition
// under gobreaker's lock: it must only count (a metric, a test channel with room) and return,
// and must not call back into the breaker.
func NewBreaker(name string, c BreakerConfig, onChange func(name string, from, to State)) *Breaker {
	c = c.withDefaults()
	b := &Breaker{cooldown: c.Cooldown, probes: uint32(c.Probes)}
	period := c.bucketPeriod()
	minSamples := uint32(c.MinSamples)
	ratio := c.FailureRatio
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         name,
		MaxRequests:  uint32(c.Probes),
		Interval:     c.Window, // gobreaker rounds it up to a multiple of BucketPeriod
		BucketPeriod: period,
		Timeout:      c.Cooldown,
		// Counts.Requests also holds requests still in flight and excluded ones, so the sample
		// size is the finished, counted outcomes only. Division (not ratio*outcomes) is correctly
		// rounded, so 8 of 20 reaches a FailureRatio of 0.4 exactly.
		ReadyToTrip: func(n gobreaker.Counts) bool {
			outcomes := n.TotalSuccesses + n.TotalFailures
			trip := outcomes >= minSamples && float64(n.TotalFailures)/float64(outcomes) >= ratio
			if trip {
				b.tripped.Store(uint64(n.TotalFailures)<<32 | uint64(outcomes))
			}
			return trip
		},
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return err == errExcluded },
		OnStateChange: func(name string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				now := time.Now()
				b.openedAt.Store(&now)
			}
			if onChange != nil {
				onChange(name, stateOf(from), stateOf(to))
			}
		},
	})
	return b
}

// Tripped is what the window held when the breaker last opened: its failures and its counted
// outcomes. Zero before it first opened.
func (b *Breaker) Tripped() (failures, outcomes uint32) {
	v := b.tripped.Load()
	return uint32(v >> 32), uint32(v)
}

func stateOf(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	default:
		return Closed
	}
}

// Allow asks to send one request. On nil error the caller must call done exactly once with
// the outcome; a later call is ignored. It returns ErrOpen while the breaker is open, or
// half-open with all Probes out.
func (b *Breaker) Allow() (done func(Result), err error) {
	report, err := b.allow()
	if err != nil {
		return nil, err
	}
	var once atomic.Bool
	return func(r Result) {
		if once.CompareAndSwap(false, true) {
			report(outcomeErr(r))
		}
	}, nil
}

// allow is Allow without the guard, gobreaker's own report: each call counts one outcome
// (outcomeErr of a Result), in the slice and the generation of the breaker allow was called in
// (an outcome from an earlier generation is ignored). HostLimits reports through it the
// requests let through before it tracked a host.
func (b *Breaker) allow() (report func(error), err error) {
	report, err = b.cb.Allow()
	if err != nil {
		// ErrOpenState and ErrTooManyRequests mean the same to a lane: do not send now.
		return nil, ErrOpen
	}
	return report, nil
}

// outcomeErr is how a Result goes through gobreaker's two-step API, which reports outcomes as
// errors.
func outcomeErr(r Result) error {
	switch r {
	case Success:
		return nil
	case Failure:
		return errFailure
	default:
		return errExcluded
	}
}

// probesFull reports whether a half-open breaker has every probe out or succeeded, so Allow
// refuses: gobreaker's count of requests let through in this generation, less the excluded.
func (b *Breaker) probesFull() bool {
	n := b.cb.Counts()
	return n.Requests >= n.TotalExclusions && n.Requests-n.TotalExclusions >= b.probes
}

// State is the breaker's state now; an open breaker whose cooldown has passed turns half-open
// here.
func (b *Breaker) State() State { return stateOf(b.cb.State()) }

// OpenFor is, while the breaker is open, the time left of its cooldown (how long a lane may
// sleep before asking again), and 0 otherwise. While open it is never 0: gobreaker leaves the
// open state only strictly after the cooldown, so the last instant reports 1ns.
func (b *Breaker) OpenFor() time.Duration {
	if b.cb.State() != gobreaker.StateOpen {
		return 0
	}
	at := b.openedAt.Load()
	if at == nil { // cannot happen: the hook stores it before the state is visible
		return b.cooldown
	}
	left := b.cooldown - time.Since(*at)
	if left <= 0 {
		return time.Nanosecond
	}
	if left > b.cooldown {
		left = b.cooldown
	}
	return left
}
