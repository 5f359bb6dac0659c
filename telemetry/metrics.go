package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metric names, as the contract between the worker and its deployment fixes them.
const (
	SendsTotal            = "webpush_sends_total"
	SendDurationSeconds   = "webpush_send_duration_seconds"
	SendWaitSeconds       = "webpush_send_wait_seconds"
	InflightRequests      = "webpush_inflight_requests"
	InflightLimit         = "webpush_inflight_limit"
	RateLimitPerSecond    = "webpush_rate_limit_per_second"
	BreakerStateMetric    = "webpush_breaker_state"
	BreakerTransitions    = "webpush_breaker_transitions_total"
	JobsFinishedTotal     = "webpush_jobs_finished_total"
	RetriesScheduledTotal = "webpush_retries_scheduled_total"
	DeadLettersTotal      = "webpush_dead_letters_total"
	UnknownAuthorityTotal = "webpush_unknown_authority_total"
	VAPIDSignaturesTotal  = "webpush_vapid_signatures_total"
	QueueEntries          = "webpush_queue_entries"
	QueueLagEntries       = "webpush_queue_lag_entries"
	OldestPendingAge      = "webpush_oldest_pending_age_seconds"
	QueueStatsRefreshed   = "webpush_queue_stats_refreshed_timestamp_seconds"
	Replicas              = "webpush_replicas"
	RedisErrorsTotal      = "webpush_redis_errors_total"
	RegistryReloadSuccess = "webpush_registry_reload_success"
	RegistryReloadTime    = "webpush_registry_reload_timestamp_seconds"
	BuildInfo             = "webpush_build_info"
	ProviderPaused        = "webpush_provider_paused"
	HostsTracked          = "webpush_hosts_tracked"
	HostsOpen             = "webpush_hosts_open"
	HostsThrottled        = "webpush_hosts_throttled"
)

const (
	exemplarJobIDLabel = "job_id"
	unknownVersion     = "unknown"
	// The native histogram's resolution: buckets grow by at most 10 %; past 160 populated
	// buckets the resolution halves, and an hour after that the histogram may reset.
	nativeBucketFactor     = 1.1
	nativeMaxBuckets       = 160
	nativeMinResetDuration = time.Hour
)

// SendDurationBuckets are the classic buckets of webpush_send_duration_seconds: from a fast
// push service's few milliseconds to past the default request timeout (10s). The native
// histogram beside them has exponential buckets (factor 1.1) and needs no list.
var SendDurationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// SendWaitBuckets are the classic buckets of webpush_send_wait_seconds: from a job read as it
// arrives (milliseconds) to one that waited behind a backlog or a breaker for an hour. A
// minute is a bound of its own, so a quantile compared with the transactional wait alert's
// threshold is not an interpolation across it. The native histogram beside them needs no list.
var SendWaitBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// The class label's values: the priority class of the lane a job was read from.
const (
	ClassTransactional = "transactional"
	ClassBulk          = "bulk"
)

// classes lists the class label's values, each pre-created for every provider.
var classes = []string{ClassTransactional, ClassBulk}

// MetricsOptions configures NewMetrics.
type MetricsOptions struct {
	// Providers are the provider ids of the registry: each gets every series at 0 at once.
	Providers []string
	// Keys are the VAPID key names: each gets webpush_vapid_signatures_total at 0.
	Keys []string
	// Version and GoVersion label webpush_build_info; empty is "unknown".
	Version, GoVersion string
	// Logger reports, once per label, the first value a caller passed outside the label's
	// bounded set, and a queue statistic SetQueueStats left out. Nil: slog.Default().
	Logger *slog.Logger
}

// Metrics holds every series the worker exports. A nil *Metrics is valid and records nothing,
// so tests and callers that have no registry may pass nil. Safe for concurrent use.
type Metrics struct {
	sends      *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	wait       *prometheus.HistogramVec
	breakerTx  *prometheus.CounterVec
	finished   *prometheus.CounterVec
	retries    *prometheus.CounterVec
	dead       *prometheus.CounterVec
	unknown    prometheus.Counter
	signatures *prometheus.CounterVec
	redisErrs  *prometheus.CounterVec

	// Label sets; each is immutable or guards itself.
	sendCodes, finishedCodes, retryCodes *labelSet
	breakerTo, deadReasons, redisOps     *labelSet
	keys                                 *labelSet
	sendClasses, waitClasses, finClasses *labelSet

	providers *providerCollector
	state     *stateCollector
	senders   *keyCollector      // keys.go
	upstream  *upstreamCollector // the upstreams' consumer groups and Redis's memory (upstream.go)
	proxy     *proxyMetrics      // the egress proxy (proxy.go)

	sigMu   sync.Mutex
	sigSeen map[string]uint64 // the signer's last total per key label; guarded by sigMu
}

// NewMetrics creates every series and registers them with reg (in a real worker the registry
// of NewRegistry). It fails when reg already holds one of the names.
func NewMetrics(reg prometheus.Registerer, o MetricsOptions) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("telemetry: NewMetrics: nil Registerer")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	m := &Metrics{
		sends: counterVec(SendsTotal,
			"Delivery attempts sent to a push service (or refused before sending), by provider, class and outcome code.",
			"provider", "class", "code"),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            SendDurationSeconds,
			Help:                            "Time from the start of a delivery attempt to its outcome, by provider.",
			Buckets:                         SendDurationBuckets,
			NativeHistogramBucketFactor:     nativeBucketFactor,
			NativeHistogramMaxBucketNumber:  nativeMaxBuckets,
			NativeHistogramMinResetDuration: nativeMinResetDuration,
		}, []string{"provider"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: SendWaitSeconds,
			Help: "Time from when a job became due to the start of its send request, by provider and class: " +
				"a first attempt counts from the job's enqueued_at (its send_at when that is later), " +
				"a retry from its write back to the lane (the time in the lane entry's id, by Redis's clock).",
			Buckets:                         SendWaitBuckets,
			NativeHistogramBucketFactor:     nativeBucketFactor,
			NativeHistogramMaxBucketNumber:  nativeMaxBuckets,
			NativeHistogramMinResetDuration: nativeMinResetDuration,
		}, []string{"provider", "class"}),
		breakerTx: counterVec(BreakerTransitions,
			"Provider breaker state changes, by provider and the state entered (closed, half_open, open).",
			"provider", "to"),
		finished: counterVec(JobsFinishedTotal,
			"Jobs that reached a final outcome, by provider, class and the code of that outcome.",
			"provider", "class", "code"),
		retries: counterVec(RetriesScheduledTotal,
			"Jobs put back to be tried again later, by provider and the retryable code that caused it.",
			"provider", "code"),
		dead: counterVec(DeadLettersTotal,
			"Jobs moved to the dead stream, by reason.",
			"reason"),
		unknown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: UnknownAuthorityTotal,
			Help: "Jobs whose endpoint host matched no provider of the registry and went to the fallback.",
		}),
		signatures: counterVec(VAPIDSignaturesTotal,
			"VAPID JWTs signed, by key name.",
			"key"),
		redisErrs: counterVec(RedisErrorsTotal,
			"Failed Redis calls, by the worker's operation.",
			"op"),

		sendCodes:     newLabelSet(log, SendsTotal, "code", OtherCode, false, codeNames(false)),
		finishedCodes: newLabelSet(log, JobsFinishedTotal, "code", OtherCode, false, codeNames(false)),
		retryCodes:    newLabelSet(log, RetriesScheduledTotal, "code", OtherCode, false, codeNames(false)),
		breakerTo:     newLabelSet(log, BreakerTransitions, "to", OtherLabel, false, breakerStates),
		deadReasons:   newLabelSet(log, DeadLettersTotal, "reason", string(DeadOther), false, names(deadReasons)),
		redisOps:      newLabelSet(log, RedisErrorsTotal, "op", string(OpOther), false, names(redisOps)),
		keys:          newLabelSet(log, VAPIDSignaturesTotal, "key", OtherLabel, true, nil),
		sendClasses:   newLabelSet(log, SendsTotal, "class", OtherLabel, false, classes),
		waitClasses:   newLabelSet(log, SendWaitSeconds, "class", OtherLabel, false, classes),
		finClasses:    newLabelSet(log, JobsFinishedTotal, "class", OtherLabel, false, classes),

		providers: newProviderCollector(),
		state:     newStateCollector(log),
		upstream:  newUpstreamCollector(),
		proxy:     newProxyMetrics(log),
		sigSeen:   make(map[string]uint64),
	}
	m.senders = newKeyCollector(m.keys, o.Providers, o.Keys)
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfo,
		Help: "Always 1; its labels are the worker's version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{
			"version":   orUnknown(o.Version),
			"goversion": orUnknown(o.GoVersion),
		},
	})
	build.Set(1)

	for _, c := range append([]prometheus.Collector{
		m.sends, m.duration, m.wait, m.breakerTx, m.finished, m.retries, m.dead, m.unknown,
		m.signatures, m.redisErrs, m.providers, m.state, m.senders, m.upstream, build,
	}, m.proxy.collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("telemetry: register metrics: %w", err)
		}
	}

	for _, r := range deadReasons {
		m.dead.WithLabelValues(string(r))
	}
	for _, op := range redisOps {
		m.redisErrs.WithLabelValues(string(op))
	}
	for _, k := range o.Keys {
		m.signatures.WithLabelValues(m.keys.value(k))
	}
	m.SetProviders(o.Providers)
	return m, nil
}

// NewRegistry returns a registry holding the Go runtime and process collectors, for the
// worker's Metrics and its /metrics listener.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// SetProviders takes the provider ids of a (re)loaded registry: the series of a provider not
// seen before start at 0. Series of a provider that left the registry stay, frozen.
func (m *Metrics) SetProviders(ids []string) {
	if m == nil {
		return
	}
	retryable := codeNames(true)
	codes := codeNames(false)
	for _, id := range ids {
		p := providerValue(id)
		m.duration.WithLabelValues(p)
		for _, class := range classes {
			m.wait.WithLabelValues(p, class)
			for _, c := range codes {
				m.sends.WithLabelValues(p, class, c)
				m.finished.WithLabelValues(p, class, c)
			}
		}
		for _, c := range retryable {
			m.retries.WithLabelValues(p, c)
		}
		for _, to := range breakerStates {
			m.breakerTx.WithLabelValues(p, to)
		}
	}
}

// Send records one delivery attempt to provider of a job of class (ClassTransactional or
// ClassBulk) with outcome code that took d: webpush_sends_total and
// webpush_send_duration_seconds. A jobID other than "" becomes the observation's exemplar
// (label job_id), cut to fit the exemplar size limit. A code that is not a taxonomy code
// counts as OtherCode, a class outside the two as OtherLabel.
func (m *Metrics) Send(provider, class, code string, d time.Duration, jobID string) {
	if m == nil {
		return
	}
	p := providerValue(provider)
	m.sends.WithLabelValues(p, m.sendClasses.value(class), m.sendCodes.value(code)).Inc()
	observe(m.duration.WithLabelValues(p), d, jobID)
}

// SendWait records, as a send request to provider of a job of class starts, how long the job
// waited since it became due (webpush_send_wait_seconds; the caller decides when that was, as
// the metric's help text says). A negative wait (clocks that disagree) counts as 0. It takes
// no exemplar: one costs many times the observation, on every send, and the job ids of slow
// sends are already webpush_send_duration_seconds's.
func (m *Metrics) SendWait(provider, class string, wait time.Duration) {
	if m == nil {
		return
	}
	observe(m.wait.WithLabelValues(providerValue(provider), m.waitClasses.value(class)), wait, "")
}

// observe adds d, at least 0, to a histogram, with jobID as its exemplar unless it is "".
func observe(obs prometheus.Observer, d time.Duration, jobID string) {
	if d < 0 {
		d = 0
	}
	if jobID == "" {
		obs.Observe(d.Seconds())
		return
	}
	obs.(prometheus.ExemplarObserver).ObserveWithExemplar(d.Seconds(), prometheus.Labels{exemplarJobIDLabel: exemplarValue(jobID)})
}

// exemplarValue cuts id so that the exemplar's label name and value together stay within
// prometheus.ExemplarMaxRunes (client_golang panics beyond it) and makes it valid UTF-8.
func exemplarValue(id string) string {
	id = strings.ToValidUTF8(id, "\uFFFD")
	room := prometheus.ExemplarMaxRunes - utf8.RuneCountInString(exemplarJobIDLabel)
	if utf8.RuneCountInString(id) <= room {
		return id
	}
	n := 0
	for i := range id {
		if n == room {
			return id[:i]
		}
		n++
	}
	return id
}

// BreakerTransition counts provider's breaker entering state to: "closed", "half_open" or
// "open" (BreakerState.String); any other value counts as OtherLabel.
func (m *Metrics) BreakerTransition(provider, to string) {
	if m == nil {
		return
	}
	m.breakerTx.WithLabelValues(providerValue(provider), m.breakerTo.value(to)).Inc()
}

// JobFinished counts a job of provider and class that reached its final outcome code.
func (m *Metrics) JobFinished(provider, class, code string) {
	if m == nil {
		return
	}
	m.finished.WithLabelValues(providerValue(provider), m.finClasses.value(class), m.finishedCodes.value(code)).Inc()
}

// RetryScheduled counts a job of provider put back for a later attempt after outcome code.
func (m *Metrics) RetryScheduled(provider, code string) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(providerValue(provider), m.retryCodes.value(code)).Inc()
}

// DeadLetter counts a job moved to the dead stream; a reason that is not one of the DeadReason
// constants counts as DeadOther.
func (m *Metrics) DeadLetter(reason DeadReason) {
	if m == nil {
		return
	}
	m.dead.WithLabelValues(m.deadReasons.value(string(reason))).Inc()
}

// UnknownAuthority counts a job whose endpoint host matched no provider of the registry.
func (m *Metrics) UnknownAuthority() {
	if m == nil {
		return
	}
	m.unknown.Inc()
}

// VAPIDSignatures sets key's webpush_vapid_signatures_total to n, the signer's own running
// count. The counter only grows: an n below the last one is ignored. Keys past MaxLabelValues
// share the OtherLabel series, which then follows the largest of their totals.
func (m *Metrics) VAPIDSignatures(key string, n uint64) {
	if m == nil {
		return
	}
	k := m.keys.value(key)
	m.sigMu.Lock()
	defer m.sigMu.Unlock()
	if last := m.sigSeen[k]; n > last {
		m.signatures.WithLabelValues(k).Add(float64(n - last))
		m.sigSeen[k] = n
	}
}

// RedisError counts a failed Redis call of operation op; a value outside the RedisOp constants
// counts as OpOther.
func (m *Metrics) RedisError(op RedisOp) {
	if m == nil {
		return
	}
	m.redisErrs.WithLabelValues(m.redisOps.value(string(op))).Inc()
}

// RegistryReload records a reload of the registry at time at: webpush_registry_reload_success
// becomes 1 or 0, and webpush_registry_reload_timestamp_seconds becomes at when ok. Both are
// absent until the first call.
func (m *Metrics) RegistryReload(ok bool, at time.Time) {
	if m == nil {
		return
	}
	m.state.registryReload(ok, at)
}

// SetReplicas sets webpush_replicas, the live replicas the heartbeat counts (absent until the
// first call).
func (m *Metrics) SetReplicas(n int) {
	if m == nil {
		return
	}
	m.state.setReplicas(n)
}

// SetQueueStats replaces the queue gauges with stats, read at time at (see QueueStat).
func (m *Metrics) SetQueueStats(stats []QueueStat, at time.Time) {
	if m == nil {
		return
	}
	m.state.setQueueStats(stats, at)
}

// SetProviderSource sets the function the per-provider gauges (webpush_inflight_requests,
// webpush_inflight_limit, webpush_rate_limit_per_second, webpush_breaker_state,
// webpush_provider_paused) are read from at every scrape. f runs on the scraping goroutine and
// must be quick and safe for concurrent use; nil removes the gauges.
func (m *Metrics) SetProviderSource(f func() []ProviderGauge) {
	if m == nil {
		return
	}
	m.providers.setSource(f)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// names are the label values of a fixed set.
func names[T ~string](set []T) []string {
	out := make([]string, len(set))
	for i, v := range set {
		out[i] = string(v)
	}
	return out
}

func orUnknown(s string) string {
	if s == "" || !utf8.ValidString(s) {
		return unknownVersion
	}
	return s
}
