package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// proxySender is a Sender whose providers may send through an egress proxy (adapter.Sender).
type proxySender interface {
	// ProxyOf is the host:port of the proxy provider's connections go through, "" for direct.
	ProxyOf(provider string) string
}

// DefaultProxyBreaker is a proxy's breaker when Config.ProxyBreaker is zero: a proxy is one
// machine every proxied provider shares, so a handful of failed tunnels in a row is enough to
// stop sending through it, and it is probed again after a short cooldown.
var DefaultProxyBreaker = limits.BreakerConfig{FailureRatio: 0.5, Window: 30 * time.Second, MinSamples: 5, Cooldown: 5 * time.Second, Probes: 1}

// proxyBreakers are the ratio breakers of the egress proxies, one per proxy host:port, shared
// by every provider whose connections go through it. A proxy's failures (PROXY_ERROR) count
// here and never against a provider's breaker: a dead proxy pauses the lanes of the providers
// behind it, their jobs wait in Redis, and no push service is judged for it.
type proxyBreakers struct {
	cfg      limits.BreakerConfig
	onChange func(name string, from, to limits.State)

	mu     sync.RWMutex
	byAddr map[string]*limits.Breaker // guarded by mu; a proxy once seen keeps its breaker

	logMu  sync.Mutex
	logged map[string]limits.State // guarded by logMu: each proxy's state last logged
}

func newProxyBreakers(c *Config) *proxyBreakers {
	cfg := c.ProxyBreaker
	if cfg == (limits.BreakerConfig{}) {
		cfg = DefaultProxyBreaker
	}
	return &proxyBreakers{cfg: cfg, byAddr: map[string]*limits.Breaker{}, logged: map[string]limits.State{}, onChange: func(name string, from, to limits.State) {
		// Runs under gobreaker's lock: hand the change on and return.
		c.Metrics.ProxyBreaker(name, breakerState(to).String())
		if c.OnProxyBreakerChange != nil {
			c.OnProxyBreakerChange(name, from, to)
		}
	}}
}

// of is the breaker of the proxy at addr, nil for "" (direct).
func (pb *proxyBreakers) of(addr string) *limits.Breaker {
	if addr == "" {
		return nil
	}
	pb.mu.RLock()
	b := pb.byAddr[addr]
	pb.mu.RUnlock()
	if b != nil { // every delivery behind a proxy asks: the common case takes no write lock
		return b
	}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	b = pb.byAddr[addr]
	if b == nil {
		b = limits.NewBreaker(addr, pb.cfg, pb.onChange)
		pb.byAddr[addr] = b
	}
	return b
}

// logChange logs the breaker of the proxy at addr when its state is not the one last logged:
// every lane of every provider behind the proxy looks, and the first to see a change logs it,
// once. It is logged by the lanes rather than in the breaker's hook, which runs under its lock.
func (pb *proxyBreakers) logChange(ctx context.Context, log *slog.Logger, addr string) {
	b := pb.of(addr)
	pb.logMu.Lock()
	// The state is read under logMu: read before it, a lane that then waited could log a
	// state older than the one another lane logged meanwhile.
	now := b.State()
	was, ok := pb.logged[addr]
	if !ok {
		was = limits.Closed
	}
	pb.logged[addr] = now
	pb.logMu.Unlock()
	if now == was {
		return
	}
	level, attrs := slog.LevelInfo, []any{"proxy", addr, "was", was.String()}
	if now == limits.Open {
		failures, outcomes := b.Tripped()
		level = slog.LevelWarn
		attrs = append(attrs, "why", fmt.Sprintf("%d of %d tunnels within %s failed, reaching the failure ratio %g (at least %d); the providers behind it wait",
			failures, outcomes, pb.cfg.Window, pb.cfg.FailureRatio, pb.cfg.MinSamples), "cooldown", pb.cfg.Cooldown.String())
	}
	log.Log(ctx, level, "dispatch: proxy breaker "+now.String(), attrs...)
}

// proxyOf is the proxy provider's connections go through now, "" for direct.
func (c *Config) proxyOf(provider string) string {
	if ps, ok := c.sender().(proxySender); ok {
		return ps.ProxyOf(provider)
	}
	return ""
}

// providerProxies is the proxy of every provider of the registry in force ("" for direct).
func (c *Config) providerProxies() map[string]string {
	out := map[string]string{}
	for _, id := range c.registry().IDs() {
		out[id] = c.proxyOf(id)
	}
	return out
}

// proxyResult is what a send's outcome tells its proxy's breaker: a tunnel the proxy did not
// open is a failure, any HTTP answer came through a tunnel it opened; an outcome without an
// answer (a refused address, a DNS failure, a push service that did not answer in the tunnel)
// says nothing certain about the proxy and counts neither way.
func proxyResult(out taxonomy.Outcome) limits.Result {
	switch {
	case out.Code == taxonomy.ProxyError:
		return limits.Failure
	case out.Status > 0:
		return limits.Success
	}
	return limits.Excluded
}

// proxyRetryDelay is how long a job whose tunnel failed waits in the delayed set: about the
// first retry's delay, jittered over [base/2, 3/2 base), and never less than the proxy's open
// breaker has left, since its lane reads nothing until then anyway.
func proxyRetryDelay(base, openFor time.Duration, rnd float64) time.Duration {
	return max(base/2+time.Duration(clamp01(rnd)*float64(base)), openFor)
}
