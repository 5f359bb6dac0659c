package telemetry

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The per-sender gauges: whether a provider has one VAPID key paused (it answered that key
// RATE_LIMITED), and until when.
const (
	KeyThrottled          = "webpush_key_throttled"
	KeyParkedUntilSeconds = "webpush_key_parked_until_seconds"
)

// KeyGauge is one sender (VAPID key name) on one provider in this replica, read at scrape time.
type KeyGauge struct {
	Provider, Key string
	// Throttled is set while the provider has the key paused: its jobs on the provider wait
	// (in the delayed set for a pause longer than a moment) and the provider's other keys go on.
	Throttled bool
	// ParkedUntil is when that pause ends; zero when the key is not paused.
	ParkedUntil time.Time
}

// keyCollector exports KeyThrottled and KeyParkedUntilSeconds for every provider and key name
// the Metrics were made with, at 0 until the source says otherwise; the key label is bounded as
// webpush_vapid_signatures_total's.
type keyCollector struct {
	throttled, until *prometheus.Desc
	keys             *labelSet
	base             [][2]string // immutable: the (provider, key) series at 0 from the start

	mu  sync.RWMutex
	src func() []KeyGauge // guarded by mu
}

func newKeyCollector(keys *labelSet, providers, names []string) *keyCollector {
	l := []string{"provider", "key"}
	c := &keyCollector{
		throttled: prometheus.NewDesc(KeyThrottled,
			"1 while the provider has the VAPID key paused in this replica (it answered that key RATE_LIMITED; its jobs on the provider wait), else 0.", l, nil),
		until: prometheus.NewDesc(KeyParkedUntilSeconds,
			"When the provider's pause of the VAPID key ends, in Unix seconds; 0 when it is not paused.", l, nil),
		keys: keys,
	}
	for _, p := range providers {
		for _, k := range names {
			c.base = append(c.base, [2]string{providerValue(p), keys.value(k)})
		}
	}
	return c
}

func (c *keyCollector) setSource(f func() []KeyGauge) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = f
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.throttled
	ch <- c.until
}

func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	src := c.src
	c.mu.RUnlock()
	type value struct{ throttled, until float64 }
	values := map[[2]string]value{}
	var order [][2]string
	for _, b := range c.base {
		if _, ok := values[b]; !ok {
			order = append(order, b)
		}
		values[b] = value{}
	}
	if src != nil {
		for _, g := range src() {
			id := [2]string{providerValue(g.Provider), c.keys.value(g.Key)}
			v, seen := values[id]
			if !seen {
				order = append(order, id)
			}
			if g.Throttled { // keys sharing the other label: the series is 1 if any is paused
				v.throttled = 1
				v.until = max(v.until, unixSeconds(g.ParkedUntil))
			}
			values[id] = v
		}
	}
	for _, id := range order {
		v := values[id]
		ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.GaugeValue, v.throttled, id[0], id[1])
		ch <- prometheus.MustNewConstMetric(c.until, prometheus.GaugeValue, v.until, id[0], id[1])
	}
}

// SetKeySource sets the function the per-sender gauges (webpush_key_throttled,
// webpush_key_parked_until_seconds) are read from at every scrape. f runs on the scraping
// goroutine and must be quick and safe for concurrent use; nil leaves the series at 0.
func (m *Metrics) SetKeySource(f func() []KeyGauge) {
	if m == nil {
		return
	}
	m.senders.setSource(f)
}
