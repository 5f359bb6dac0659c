package telemetry

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// MaxLabelValues bounds the distinct values of an open label set (the op of
// webpush_redis_errors_total, the key of webpush_vapid_signatures_total). Values beyond it are
// counted as OtherLabel.
const MaxLabelValues = 32

// OtherLabel is the value a label takes when the caller passes one outside its set (an unknown
// breaker state, Redis operation past MaxLabelValues, VAPID key past MaxLabelValues).
const OtherLabel = "other"

// OtherCode is the code label of an outcome that is not a taxonomy code. Codes are upper case,
// so it is too.
const OtherCode = "OTHER"

// DeadReason is why a job went to the dead stream: a fixed class, the label of
// webpush_dead_letters_total. DeadLetter counts any value outside the constants as DeadOther.
type DeadReason string

const (
	// DeadInvalidJob: the entry is not a usable job (INVALID_JOB); nothing was sent.
	DeadInvalidJob DeadReason = "invalid_job"
	// DeadRetriesExhausted: the last allowed attempt failed with a retryable code.
	DeadRetriesExhausted DeadReason = "retries_exhausted"
	// DeadTooManyDeliveries: the entry was delivered to workers too often without any of them
	// finishing it (a job that crashes workers).
	DeadTooManyDeliveries DeadReason = "too_many_deliveries"
	// DeadCapReached: a limit on the job's stay (its retry budget or its queue's cap) ended it.
	DeadCapReached DeadReason = "cap_reached"
	// DeadDuplicate: the job repeats one the gateway already holds or finished.
	DeadDuplicate DeadReason = "duplicate"
	// DeadOther: any other reason, and any value that is not one of these constants.
	DeadOther DeadReason = "other"
)

// RedisOp is the worker's operation a failed Redis call was part of: a fixed set, the label of
// webpush_redis_errors_total. RedisError counts any value outside the constants as OpOther.
type RedisOp string

const (
	OpRead      RedisOp = "read"      // intake and lane reads
	OpWrite     RedisOp = "write"     // the state changes of entries (moves, records, retries)
	OpCheck     RedisOp = "check"     // the looks before a send (owner, sent and gone marks)
	OpHeartbeat RedisOp = "heartbeat" // the heartbeat
	OpProbe     RedisOp = "probe"     // the background write probe behind /readyz
	OpReclaim   RedisOp = "reclaim"   // claims of entries of replicas that are gone
	OpStats     RedisOp = "stats"     // the queue statistics
	OpSetup     RedisOp = "setup"     // creating the consumer groups, at start and for a reload's new lanes
	OpPromote   RedisOp = "promote"   // moving due retries back to their lanes
	OpJanitor   RedisOp = "janitor"   // removing idle consumers
	OpOther     RedisOp = "other"     // any other value
)

// redisOps lists every RedisOp, each pre-created at 0.
var redisOps = []RedisOp{OpRead, OpWrite, OpCheck, OpHeartbeat, OpProbe, OpReclaim, OpStats, OpSetup, OpPromote, OpJanitor, OpOther}

// deadReasons lists every DeadReason, each pre-created at 0.
var deadReasons = []DeadReason{
	DeadInvalidJob, DeadRetriesExhausted, DeadTooManyDeliveries, DeadCapReached, DeadDuplicate, DeadOther,
}

// BreakerState is a provider breaker's state, the value of webpush_breaker_state.
type BreakerState int

const (
	BreakerClosed   BreakerState = 0 // sending normally
	BreakerHalfOpen BreakerState = 1 // letting trial requests through
	BreakerOpen     BreakerState = 2 // refusing sends
)

// String is the state as the to label of webpush_breaker_transitions_total spells it:
// "closed", "half_open" or "open" (OtherLabel for a value outside the three).
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half_open"
	case BreakerOpen:
		return "open"
	}
	return OtherLabel
}

// breakerStates lists the to label values, each pre-created at 0 for every provider.
var breakerStates = []string{BreakerClosed.String(), BreakerHalfOpen.String(), BreakerOpen.String()}

// labelSet maps a caller's value to a label value from a bounded set: a value of the set is
// itself, anything else is other. An open set (open true) also admits new values until it
// holds MaxLabelValues. The first value mapped to other is logged with the metric's name, once.
// Safe for concurrent use.
type labelSet struct {
	metric, label, other string
	open                 bool
	log                  *slog.Logger

	mu     sync.Mutex
	known  map[string]bool // immutable after construction unless open; guarded by mu when open
	warned bool            // guarded by mu
}

func newLabelSet(log *slog.Logger, metric, label, other string, open bool, values []string) *labelSet {
	s := &labelSet{metric: metric, label: label, other: other, open: open, log: log, known: make(map[string]bool, len(values))}
	for _, v := range values {
		s.known[v] = true
	}
	return s
}

// value returns v when it belongs to the set (adding it when the set is open and has room),
// other otherwise.
func (s *labelSet) value(v string) string {
	if !s.open {
		if s.known[v] { // immutable: no lock on the hot path
			return v
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.warn(v, "is not one of its values")
		return s.other
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known[v] {
		return v
	}
	if len(s.known) < MaxLabelValues && v != "" && utf8.ValidString(v) {
		s.known[v] = true
		return v
	}
	s.warn(v, "is empty, not UTF-8, or beyond the set's "+strconv.Itoa(MaxLabelValues)+" distinct values")
	return s.other
}

// warn logs the first value mapped to other. s.mu is held.
func (s *labelSet) warn(v, why string) {
	if s.warned {
		return
	}
	s.warned = true
	s.log.Warn("telemetry: a label value outside its bounded set is counted as "+s.other+"; later ones are not logged",
		"metric", s.metric, "label", s.label, "value", printable(v), "why", why)
}

// codeNames are the taxonomy codes as label values; with retryableOnly, only the retryable.
func codeNames(retryableOnly bool) []string {
	var names []string
	for _, c := range taxonomy.Codes() {
		if !retryableOnly || c.Retryable() {
			names = append(names, string(c))
		}
	}
	return names
}

// providerValue makes a provider id safe as a label value: client_golang refuses a value
// that is not UTF-8. Provider ids come from the registry, which bounds them.
func providerValue(p string) string {
	if utf8.ValidString(p) {
		return p
	}
	return strings.ToValidUTF8(p, "\uFFFD")
}

// printable cuts v for a log line.
func printable(v string) string {
	const max = 64
	if len(v) > max {
		v = v[:max] + "..."
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}
