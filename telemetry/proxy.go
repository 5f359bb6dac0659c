package telemetry

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// The egress proxy's series. Their proxy label is the proxy's host:port as the worker's flags
// and registry name it (never its credentials), a bounded set: the proxies configured.
const (
	ProxyUp            = "webpush_proxy_up"
	ProxyTunnelsTotal  = "webpush_proxy_tunnels_total"
	ProxyFailuresTotal = "webpush_proxy_failures_total"
	ProxyBreakerState  = "webpush_proxy_breaker_state"
	ProviderProxy      = "webpush_provider_proxy"
)

// ProxyReasons are the reason label values of webpush_proxy_failures_total, as the adapter
// names a tunnel's failure.
var ProxyReasons = []string{"connect", "timeout", "auth", "status", "tls", "protocol"}

// proxyMetrics holds the proxy series.
type proxyMetrics struct {
	up       *prometheus.GaugeVec
	tunnels  *prometheus.CounterVec
	failures *prometheus.CounterVec
	breaker  *prometheus.GaugeVec
	provider *prometheus.GaugeVec
	proxies  *labelSet
	reasons  *labelSet
}

func newProxyMetrics(log *slog.Logger) *proxyMetrics {
	return &proxyMetrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ProxyUp,
			Help: "1 when the last tunnel this replica asked the egress proxy for was opened, 0 when it failed."}, []string{"proxy"}),
		tunnels: counterVec(ProxyTunnelsTotal, "Tunnels the egress proxy opened for this replica, by proxy.", "proxy"),
		failures: counterVec(ProxyFailuresTotal,
			"Tunnels the egress proxy did not open (PROXY_ERROR), by proxy and reason (connect, timeout, auth, status, tls, protocol).",
			"proxy", "reason"),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ProxyBreakerState,
			Help: "The egress proxy's breaker in this replica: 0 closed, 1 half-open, 2 open. While it is open, the lanes of the providers behind it read nothing."}, []string{"proxy"}),
		provider: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ProviderProxy,
			Help: "1 for each provider and the egress proxy its connections go through (proxy \"direct\" for none)."}, []string{"provider", "proxy"}),
		proxies: newLabelSet(log, ProxyUp, "proxy", OtherLabel, true, nil),
		reasons: newLabelSet(log, ProxyFailuresTotal, "reason", OtherLabel, false, ProxyReasons),
	}
}

func (p *proxyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.up, p.tunnels, p.failures, p.breaker, p.provider}
}

// ProxyTunnel records one tunnel asked of proxy: opened (ok), or failed for reason.
func (m *Metrics) ProxyTunnel(proxy, reason string, ok bool) {
	if m == nil {
		return
	}
	p := m.proxy
	name := p.proxies.value(proxy)
	if ok {
		p.tunnels.WithLabelValues(name).Inc()
		p.up.WithLabelValues(name).Set(1)
		return
	}
	p.failures.WithLabelValues(name, p.reasons.value(reason)).Inc()
	p.up.WithLabelValues(name).Set(0)
}

// ProxyBreaker records the state a proxy's breaker entered (closed, half_open, open).
func (m *Metrics) ProxyBreaker(proxy, state string) {
	if m == nil {
		return
	}
	v := 0.0
	switch state {
	case BreakerHalfOpen.String():
		v = 1
	case BreakerOpen.String():
		v = 2
	}
	m.proxy.breaker.WithLabelValues(m.proxy.proxies.value(proxy)).Set(v)
}

// SetProviderProxies takes the proxy of each provider ("" for direct), after a (re)load:
// every proxy's series start at 0 and webpush_provider_proxy says which provider uses which.
func (m *Metrics) SetProviderProxies(byProvider map[string]string) {
	if m == nil {
		return
	}
	p := m.proxy
	p.provider.Reset()
	for id, proxy := range byProvider {
		name := "direct"
		if proxy != "" {
			name = p.proxies.value(proxy)
			p.tunnels.WithLabelValues(name)
			p.breaker.WithLabelValues(name)
			for _, r := range ProxyReasons {
				p.failures.WithLabelValues(name, r)
			}
		}
		p.provider.WithLabelValues(providerValue(id), name).Set(1)
	}
}
