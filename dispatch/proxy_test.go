package dispatch

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// proxyLog records the state changes of the proxies' breakers.
type proxyLog struct {
	mu    sync.Mutex
	state map[string]limits.State
	seen  map[string][]limits.State
}

func (p *proxyLog) hook(proxy string, _, to limits.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		p.state, p.seen = map[string]limits.State{}, map[string][]limits.State{}
	}
	p.state[proxy] = to
	p.seen[proxy] = append(p.seen[proxy], to)
}

func (p *proxyLog) of(proxy string) (limits.State, []limits.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state[proxy], append([]limits.State(nil), p.seen[proxy]...)
}

// TestDeadProxyPausesSendingAndLosesNothing stops the egress proxy with jobs of three providers
// queued, and starts it again: the proxy's breaker opens (no provider's does), nothing is sent
// or dead-lettered meanwhile, and once the proxy is back every job is accepted at its first
// attempt, however few retries the worker allows.
func TestDeadProxyPausesSendingAndLosesNothing(t *testing.T) {
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(nil), viaProxy: true})
	subs := map[string]jobfmt.Subscription{
		"fcm": e.subscribe(pushsim.FCM, e.key), "apple": e.subscribe(pushsim.Apple, e.key), "autopush": e.subscribe(pushsim.Autopush, e.key),
	}
	var bl registrytest.BreakerLog
	var pl proxyLog
	cfg := e.config(e.store)
	cfg.OnBreakerChange = bl.Hook
	cfg.OnProxyBreakerChange = pl.hook
	// One retry at most: a proxy outage that spent attempts would dead-letter these jobs.
	cfg.Backoff = Backoff{Base: 100 * time.Millisecond, Cap: 200 * time.Millisecond, MaxRetries: 1}
	cfg.ProxyBreaker = limits.BreakerConfig{FailureRatio: 0.5, Window: 10 * time.Second, MinSamples: 3, Cooldown: 300 * time.Millisecond, Probes: 1}
	e.proxy.Stop()
	var ids []string
	for p, sub := range subs {
		for i := range 10 {
			id := fmt.Sprintf("%s-%d", p, i)
			ids = append(ids, id)
			e.enqueue(job(id, sub, "through the proxy"))
		}
	}
	e.start(cfg)
	addr := e.proxy.Addr()
	waitFor(t, "the proxy's breaker open", func() bool { _, seen := pl.of(addr); return len(seen) > 0 })
	holds(t, 2*time.Second, "a dead proxy: nothing sent, recorded or dead", func() bool {
		return len(e.sim.Deliveries()) == 0 && len(e.all("results")) == 0 && len(e.all("dead")) == 0
	})
	if _, seen := pl.of(addr); len(seen) < 3 {
		t.Errorf("proxy breaker changes %v during 2s with a 300ms cooldown, want it to probe (half-open) and open again", seen)
	}

	e.proxy.Restart()
	e.waitAccepted(ids)
	waitFor(t, "the proxy's breaker closed", func() bool { s, _ := pl.of(addr); return s == limits.Closed })
	for _, id := range ids {
		if r := e.one("results", id); r["attempt"] != "0" {
			t.Errorf("%s accepted at attempt %s, want 0: a proxy outage spends no attempt", id, r["attempt"])
		}
	}
	for _, p := range []string{"fcm", "apple", "autopush", "wns", "fallback"} {
		if cs := bl.Of(p); len(cs) != 0 {
			t.Errorf("%s breaker changed %d times; only the proxy failed", p, len(cs))
		}
	}
	if e.proxy.Names() != 0 {
		t.Errorf("the proxy was asked for %d names; the worker asks for addresses only", e.proxy.Names())
	}
	// The log says when the proxy's breaker opened, why, and when it closed: once a change,
	// though the lanes of three providers on every shard see each.
	_, seen := pl.of(addr)
	opens := 0
	for _, s := range seen {
		if s == limits.Open {
			opens++
		}
	}
	logs := e.logs.String()
	opened := strings.Count(logs, `msg="dispatch: proxy breaker open" proxy=`+addr)
	if opened == 0 || opened > opens || !strings.Contains(logs, "tunnels within") {
		t.Errorf("%d log lines of the proxy's breaker opening (it opened %d times), want 1 to %d, each saying why:\n%s", opened, opens, opens, logs)
	}
	if n := strings.Count(logs, `msg="dispatch: proxy breaker closed" proxy=`+addr); n != 1 {
		t.Errorf("%d log lines of the proxy's breaker closing, want 1", n)
	}
}
