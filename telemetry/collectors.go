package telemetry

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ProviderGauge is one provider's state in this replica, read at scrape time.
type ProviderGauge struct {
	Provider      string
	InFlight      int          // requests in flight now
	InFlightLimit int          // the in-flight slots this replica may use
	RatePerSecond float64      // this replica's share of the provider's rate
	Breaker       BreakerState // the provider breaker's state
	Paused        bool         // `gateway-worker pause PROVIDER` is in effect
	// Hosts are the counts of the hosts the provider limits one by one (a fallback entry's
	// self-hosted push services); nil for a provider without per-host limits.
	Hosts *HostGauge
}

// HostGauge counts the hosts of a provider that carry limits of their own in this replica.
type HostGauge struct {
	Tracked   int // hosts with a breaker's failures or a throttle of their own
	Open      int // of those, hosts whose own breaker is open or half-open
	Throttled int // of those, hosts held to a rate or a Retry-After pause of their own
}

// Queue stream names, the stream label of the queue gauges; a lane is "lane:<provider id>", the
// lane of the provider's bulk jobs "lane:<provider id>:bulk". The class label of a lane's
// gauges is its class (ClassTransactional, ClassBulk); the other streams hold jobs of both
// classes (an intake holds the jobs written to it, whatever class they name), or none, and have
// it empty.
const (
	StreamIntake     = "intake"
	StreamBulkIntake = "intake:bulk"
	StreamDelayed    = "delayed"
	StreamDead       = "dead"
	StreamResults    = "results"
	StreamGone       = "gone"
	lanePrefix       = "lane:"
	// bulkLaneSuffix ends the name of a provider's bulk lane.
	bulkLaneSuffix = ":bulk"
)

// QueueStat is one stream (or the delayed set) of one shard, as the caller's background loop
// read it from Redis.
type QueueStat struct {
	Shard int
	// Stream is StreamIntake, StreamBulkIntake, StreamDelayed, StreamDead, StreamResults, StreamGone,
	// "lane:<provider id>" or "lane:<provider id>:bulk".
	Stream string
	// Entries is the stream's length (the set's size for StreamDelayed).
	Entries int64
	// Lag is the entries the consumer group has not read yet; exported for the intake and
	// the lanes only, the streams more replicas can work off.
	Lag int64
	// OldestPendingAge is the age of the oldest entry read but not acknowledged, when
	// HasPending; the intake's and the lanes' read 0 otherwise.
	OldestPendingAge time.Duration
	HasPending       bool
}

// providerCollector exports the per-provider gauges from the caller's source, called at
// scrape time.
type providerCollector struct {
	inflight, limit, rate, breaker, paused  *prometheus.Desc
	hostsTracked, hostsOpen, hostsThrottled *prometheus.Desc

	mu  sync.RWMutex
	src func() []ProviderGauge // guarded by mu
}

func newProviderCollector() *providerCollector {
	l := []string{"provider"}
	return &providerCollector{
		inflight: prometheus.NewDesc(InflightRequests, "Requests to the provider in flight in this replica.", l, nil),
		limit:    prometheus.NewDesc(InflightLimit, "In-flight requests this replica may have open to the provider.", l, nil),
		rate:     prometheus.NewDesc(RateLimitPerSecond, "Requests per second this replica may send to the provider.", l, nil),
		breaker:  prometheus.NewDesc(BreakerStateMetric, "The provider breaker's state in this replica: 0 closed, 1 half-open, 2 open.", l, nil),
		paused:   prometheus.NewDesc(ProviderPaused, "1 while the provider is paused by an operator, else 0.", l, nil),
		hostsTracked: prometheus.NewDesc(HostsTracked,
			"Hosts of the provider with limits of their own in this replica (a breaker's failures or a throttle).", l, nil),
		hostsOpen: prometheus.NewDesc(HostsOpen,
			"Hosts of the provider whose own breaker is open or half-open in this replica.", l, nil),
		hostsThrottled: prometheus.NewDesc(HostsThrottled,
			"Hosts of the provider held to a rate or a Retry-After pause of their own in this replica.", l, nil),
	}
}

func (c *providerCollector) setSource(f func() []ProviderGauge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = f
}

func (c *providerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.inflight, c.limit, c.rate, c.breaker, c.paused, c.hostsTracked, c.hostsOpen, c.hostsThrottled} {
		ch <- d
	}
}

func (c *providerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	src := c.src
	c.mu.RUnlock()
	if src == nil {
		return
	}
	for _, g := range src() {
		p := providerValue(g.Provider)
		paused := 0.0
		if g.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(g.InFlight), p)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(g.InFlightLimit), p)
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, g.RatePerSecond, p)
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, float64(g.Breaker), p)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, p)
		if h := g.Hosts; h != nil {
			ch <- prometheus.MustNewConstMetric(c.hostsTracked, prometheus.GaugeValue, float64(h.Tracked), p)
			ch <- prometheus.MustNewConstMetric(c.hostsOpen, prometheus.GaugeValue, float64(h.Open), p)
			ch <- prometheus.MustNewConstMetric(c.hostsThrottled, prometheus.GaugeValue, float64(h.Throttled), p)
		}
	}
}

// stateCollector exports the gauges a caller's loop writes now and then: the queue statistics,
// the replica count and the registry reload. Each is absent until its first write, so a value
// is never a default nobody measured.
type stateCollector struct {
	entries, lag, oldest, refreshed, replicas, reloadOK, reloadAt *prometheus.Desc
	log                                                           *slog.Logger

	mu          sync.Mutex
	queue       []QueueStat // guarded by mu
	refreshedAt time.Time   // guarded by mu; zero before the first SetQueueStats
	replicaN    int         // guarded by mu
	haveReplica bool        // guarded by mu
	reloaded    bool        // guarded by mu: RegistryReload was called
	reloadGood  bool        // guarded by mu: the last reload succeeded
	lastGood    time.Time   // guarded by mu; zero before the first successful reload
}

func newStateCollector(log *slog.Logger) *stateCollector {
	q := []string{"shard", "stream", "class"}
	return &stateCollector{
		entries:   prometheus.NewDesc(QueueEntries, "Entries in the stream (members of the delayed set). The same on every replica: aggregate with max.", q, nil),
		lag:       prometheus.NewDesc(QueueLagEntries, "Entries of the intake or a lane the consumer group has not read yet. The same on every replica: aggregate with max.", q, nil),
		oldest:    prometheus.NewDesc(OldestPendingAge, "Age of the stream's oldest entry read but not acknowledged. The same on every replica: aggregate with max.", q, nil),
		refreshed: prometheus.NewDesc(QueueStatsRefreshed, "When this replica last read the queue statistics, in Unix seconds.", nil, nil),
		replicas:  prometheus.NewDesc(Replicas, "Live replicas of the worker, as the heartbeat counts them. The same on every replica: aggregate with max.", nil, nil),
		reloadOK:  prometheus.NewDesc(RegistryReloadSuccess, "1 if the last load of the registry succeeded, else 0.", nil, nil),
		reloadAt:  prometheus.NewDesc(RegistryReloadTime, "When the registry was last loaded successfully, in Unix seconds.", nil, nil),
		log:       log,
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.entries, c.lag, c.oldest, c.refreshed, c.replicas, c.reloadOK, c.reloadAt} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.queue {
		shard, class := strconv.Itoa(s.Shard), streamClass(s.Stream)
		ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(s.Entries), shard, s.Stream, class)
		if hasLag(s.Stream) {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(s.Lag), shard, s.Stream, class)
		}
		// The streams a group reads always have the age, 0 while nothing is pending, so that
		// an alert or a panel on it has a series from the start.
		if s.HasPending || hasLag(s.Stream) {
			age := 0.0
			if s.HasPending {
				age = s.OldestPendingAge.Seconds()
			}
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, shard, s.Stream, class)
		}
	}
	if !c.refreshedAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.refreshed, prometheus.GaugeValue, unixSeconds(c.refreshedAt))
	}
	if c.haveReplica {
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(c.replicaN))
	}
	if c.reloaded {
		ok := 0.0
		if c.reloadGood {
			ok = 1
		}
		ch <- prometheus.MustNewConstMetric(c.reloadOK, prometheus.GaugeValue, ok)
	}
	if !c.lastGood.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.reloadAt, prometheus.GaugeValue, unixSeconds(c.lastGood))
	}
}

// setQueueStats replaces the queue statistics. A stat whose stream is none of the names
// QueueStat lists, or that repeats a shard and stream, is left out and logged: the first would
// be an unbounded label, the second a duplicate series that fails the scrape.
func (c *stateCollector) setQueueStats(stats []QueueStat, at time.Time) {
	kept := make([]QueueStat, 0, len(stats))
	type key struct {
		shard  int
		stream string
	}
	seen := make(map[key]bool, len(stats))
	for _, s := range stats {
		k := key{s.Shard, s.Stream}
		switch {
		case !knownStream(s.Stream):
			c.log.Warn("telemetry: queue statistic left out: unknown stream name", "shard", s.Shard, "stream", printable(s.Stream))
		case seen[k]:
			c.log.Warn("telemetry: queue statistic left out: shard and stream given twice", "shard", s.Shard, "stream", s.Stream)
		default:
			seen[k] = true
			kept = append(kept, s)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = kept
	c.refreshedAt = at
}

func (c *stateCollector) setReplicas(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replicaN, c.haveReplica = n, true
}

func (c *stateCollector) registryReload(ok bool, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloaded, c.reloadGood = true, ok
	if ok {
		c.lastGood = at
	}
}

// knownStream reports whether s is a stream label value QueueStat allows.
func knownStream(s string) bool {
	switch s {
	case StreamIntake, StreamBulkIntake, StreamDelayed, StreamDead, StreamResults, StreamGone:
		return true
	}
	id, ok := strings.CutPrefix(s, lanePrefix)
	id = strings.TrimSuffix(id, bulkLaneSuffix)
	return ok && id != "" && providerValue(id) == id
}

// streamClass is the class label of a stream's queue gauges: its class for a lane, "" (which
// Prometheus stores as no label) for the streams and the set that hold both classes or none.
func streamClass(stream string) string {
	// The suffix is looked for after the prefix: "lane:bulk" is the lane of a provider "bulk".
	switch rest, lane := strings.CutPrefix(stream, lanePrefix); {
	case !lane:
		return ""
	case strings.HasSuffix(rest, bulkLaneSuffix):
		return ClassBulk
	}
	return ClassTransactional
}

// hasLag reports whether the stream's lag is exported: the intakes and the lanes.
func hasLag(stream string) bool {
	return stream == StreamIntake || stream == StreamBulkIntake || strings.HasPrefix(stream, lanePrefix)
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
