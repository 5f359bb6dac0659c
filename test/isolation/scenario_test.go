// Package isolation_test proves provider isolation with numbers, through the real pipeline: a
// real redis-server (AOF, fsync always), pushsim over TLS and HTTP/2 under the real provider
// host names, and dispatch.Run in this process with a registry whose limits are the product's.
//
// A feeder enqueues jobs for FCM, Autopush, Apple and WNS at steady per-provider rates. The
// registry's token buckets are above those rates, so in a healthy phase each provider's
// throughput is its arrival rate (not the CPU: the whole load is a small part of what this
// machine's pipeline carries). Then Autopush stalls (every request hangs until the client's
// timeout), and later fails 40 % of its requests with 503. In each phase the test counts, from
// the results ledger, the jobs ACCEPTED per second per provider and compares them with the
// healthy baseline of the same run.
//
//	go test -race -run TestIsolation -v ./test/isolation/
//	go test -run '^$' -bench BenchmarkIsolation -benchtime 1x ./test/isolation/
package isolation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// healthy are the providers that must keep their throughput while Autopush misbehaves.
var healthy = []string{"fcm", "apple", "wns"}

// allProviders are the providers fed, in the order results are printed.
var allProviders = []string{"fcm", "autopush", "apple", "wns"}

// scenario is one isolation run's load and timing.
type scenario struct {
	// arrival is the jobs per second the feeder enqueues for each feed: a provider id, or a
	// name of targets' (the jobs' ids start with it).
	arrival map[string]float64
	// targets, when set, are the feeds and where their subscriptions point (the fallback
	// scenario's hosts); by default every provider of allProviders is one, at its own host.
	targets []target
	// registry, when set, replaces registryYAML's.
	registry string
	// bucket is the registry rate as a multiple of the arrival rate: above 1, so a healthy
	// provider's throughput is its arrival rate, and the backlog a fault leaves drains at
	// (bucket-1) × arrival.
	bucket float64
	// warmup runs before the baseline (connections, JIT-free but caches warm).
	warmup time.Duration
	// phase is the length of the baseline and of each fault phase.
	phase time.Duration
	// hosts are more hosts than the targets' that the sender reaches pushsim at.
	hosts []string
	// viaProxy sends every provider through a proxytest CONNECT proxy.
	viaProxy bool
}

// target is one feed of a scenario: subscriptions of pushsim provider at host ("": the
// provider's own).
type target struct {
	name, provider, host string
}

// feeds are the targets of the scenario, in the order results are printed.
func (sc scenario) feeds() []target {
	if len(sc.targets) > 0 {
		return sc.targets
	}
	var out []target
	for _, id := range allProviders {
		out = append(out, target{name: id, provider: id})
	}
	return out
}

// phase is one measured stretch of a run.
type phase struct {
	name     string
	from, to time.Time
	// fault is what Autopush did meanwhile; "" for the baseline.
	fault string
}

// run is Redis, pushsim and a running worker, fed at the scenario's rates.
type run struct {
	tb       testing.TB
	sc       scenario
	sim      *pushsim.Server
	store    *stream.Store
	insp     *inspect.Inspector // the operators' view of the same Redis: audit, counts, ledger
	producer *stream.Producer
	subs     map[string][]job.Subscription
	key      *vapid.Key // the subscriptions' application server key
	breakers registrytest.BreakerLog

	mu  sync.Mutex
	ids []string // every job enqueued; guarded by mu
}

// testTimings are the registry's defaults and heartbeat in every scenario: timeout, breaker
// and heartbeat settings short enough for a test (a 1 s request timeout, a 2 s breaker window
// and a 1 s cooldown), to follow a "defaults:" line.
const testTimings = `  timeout: 1s
  connect_timeout: 500ms
  tls_timeout: 500ms
  response_header_timeout: 800ms
` + registrytest.QuickBreaker + `heartbeat:
  every: 500ms
  stale_after: 2s
`

// registryYAML is the registry of the run: the product's limits with the scenario's rates, and
// the testTimings.
func (sc scenario) registryYAML() string {
	var b strings.Builder
	b.WriteString("version: 1\ndefaults:\n  max_in_flight: 32\n" + testTimings + "providers:\n")
	hosts := map[string]string{
		"fcm": "fcm.googleapis.com", "autopush": "updates.push.services.mozilla.com",
		"apple": "web.push.apple.com", "wns": "notify.windows.com",
	}
	for _, id := range allProviders {
		rate := sc.arrival[id] * sc.bucket
		fmt.Fprintf(&b, "  - id: %s\n    hosts: [%s]\n    rate: %g\n    burst: %d\n", id, hosts[id], rate, max(1, int(rate/4)))
	}
	b.WriteString("  - id: fallback\n    kind: generic\n")
	return b.String()
}

func startRun(tb testing.TB, sc scenario) *run {
	tb.Helper()
	srv := redistest.Start(tb)
	sim := simtest.Start(tb, pushsim.Config{MaxDeliveries: 10})
	key := simtest.VAPIDKey(tb)
	yaml := sc.registry
	if yaml == "" {
		yaml = sc.registryYAML()
	}
	reg, err := providers.Parse("registry.yaml", []byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	hosts := append([]string(nil), sc.hosts...)
	for _, f := range sc.feeds() {
		if f.host != "" {
			hosts = append(hosts, f.host)
		}
	}
	var proxy *adapter.Proxy
	if sc.viaProxy {
		px := proxytest.Start(tb, proxytest.Config{})
		if proxy, err = adapter.ParseProxy(adapter.ProxyOptions{Spec: px.URL()}); err != nil {
			tb.Fatal(err)
		}
	}
	sender := simtest.SenderVia(tb, sim, reg, proxy, hosts...)
	store, err := stream.Open(srv.URL(), stream.OpenOptions{Options: stream.Options{Consumer: "isolation"}, BlockingPoolSize: 16})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })

	r := &run{tb: tb, sc: sc, sim: sim, store: store, insp: inspect.New(srv.Client(tb), stream.Options{}), subs: map[string][]job.Subscription{}, key: key}
	r.producer = stream.NewProducer(srv.Client(tb), "", 1)
	for _, f := range sc.feeds() {
		for range 8 {
			s, err := sim.Subscribe(f.provider, f.host, key.PublicKey())
			if err != nil {
				tb.Fatal(err)
			}
			r.subs[f.name] = append(r.subs[f.name], s)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dispatch.Run(ctx, dispatch.Config{
			Store: r.store, Sender: sender, Registry: reg, Keys: map[string]*vapid.Key{"default": key},
			Block: 50 * time.Millisecond, Grace: 5 * time.Second,
			// Retries come back quickly, and often enough that no job runs out of them while
			// Autopush misbehaves: every job must end ACCEPTED once it recovers.
			Backoff:         dispatch.Backoff{Base: 250 * time.Millisecond, Cap: time.Second, MaxRetries: 40},
			OnBreakerChange: r.breakers.Hook,
			Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	return r
}

// feed enqueues jobs for every feed at its arrival rate until the returned stop is called. Every 10 ms it enqueues, in one pipeline, what is due by the elapsed time, so a late
// tick catches up instead of lowering the rate.
func (r *run) feed() (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		start := time.Now()
		fed := map[string]int{}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			elapsed := time.Since(start).Seconds()
			var lines [][]byte
			var ids []string
			for _, f := range r.sc.feeds() {
				p := f.name
				for due := int(elapsed * r.sc.arrival[p]); fed[p] < due; fed[p]++ {
					id := fmt.Sprintf("%s-%06d", p, fed[p])
					line, err := json.Marshal(map[string]any{"id": id, "subscription": r.subs[p][fed[p]%len(r.subs[p])],
						"payload": `{"title":"Your order shipped","body":"Order 4417 arrives Thursday."}`, "ttl": 3600})
					if err != nil {
						panic(err)
					}
					lines, ids = append(lines, line), append(ids, id)
				}
			}
			if len(lines) > 0 {
				if _, err := r.producer.Enqueue(context.Background(), lines...); err != nil {
					r.tb.Errorf("feed: %v", err)
					return
				}
				r.mu.Lock()
				r.ids = append(r.ids, ids...)
				r.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-exited }) }
	r.tb.Cleanup(stop)
	return stop
}

// measure runs one phase: fault on Autopush (Kind None for the baseline) for the scenario's
// phase length, then the fault cleared.
func (r *run) measure(name string, fault pushsim.Fault) phase {
	r.tb.Helper()
	return r.measureWith(name, fault, func(f pushsim.Fault) error { return r.sim.SetFault(pushsim.Autopush, f) })
}

// measureWith runs one phase with fault set by set (Kind None for the baseline) for the
// scenario's phase length, then cleared. The phase is timed by the wall clock; sleeping is
// what a phase is.
func (r *run) measureWith(name string, fault pushsim.Fault, set func(pushsim.Fault) error) phase {
	r.tb.Helper()
	p := phase{name: name, from: time.Now()}
	if fault.Kind != pushsim.None {
		p.fault = fault.Kind.String()
		if err := set(fault); err != nil {
			r.tb.Fatal(err)
		}
	}
	time.Sleep(r.sc.phase)
	p.to = time.Now()
	if err := set(pushsim.Fault{}); err != nil {
		r.tb.Fatal(err)
	}
	return p
}

// recovered waits, after a fault phase that ended at after, for Autopush's breaker to be closed
// and for its backlog (lane and retries) to drain, so the next phase starts from a healthy
// pipeline. The breaker may have closed before the phase ended: under a fault that fails 40 %
// of the requests, a half-open probe succeeds more often than not.
func (r *run) recovered(after time.Time) {
	r.tb.Helper()
	var counts map[string]int64
	defer func() {
		// Said only when the wait failed: where the breaker and the backlog stood.
		if r.tb.Failed() {
			r.tb.Logf("breaker changes: %s\ncounts at the last look: %v", r.breakers.Summary(after), counts)
		}
	}()
	waitFor(r.tb, time.Minute, "autopush's breaker closed and its backlog drained", func() bool {
		c, err := r.insp.Counts(context.Background())
		if err == nil {
			counts = c
		}
		return r.breakers.State("autopush") == limits.Closed && err == nil && c["lane:autopush"] <= 2 && c["delayed"] == 0
	})
}

// quiesce waits until every job enqueued has a terminal record and returns the audit.
func (r *run) quiesce() inspect.AuditReport {
	r.tb.Helper()
	r.mu.Lock()
	ids := append([]string(nil), r.ids...)
	r.mu.Unlock()
	var rep inspect.AuditReport
	waitFor(r.tb, time.Minute, "a terminal record for every job", func() bool {
		var err error
		rep, _, err = r.insp.Audit(context.Background(), ids)
		if err != nil {
			r.tb.Fatal(err)
		}
		return rep.None == 0
	})
	return rep
}

// rates are the jobs ACCEPTED per second in each phase, by feed (the start of the job id),
// from the ledger; codes counts every ledger record by feed and code.
func (r *run) rates(phases []phase) (perPhase []map[string]float64, codes map[string]map[string]int) {
	r.tb.Helper()
	perPhase = make([]map[string]float64, len(phases))
	for i := range perPhase {
		perPhase[i] = map[string]float64{}
	}
	codes = map[string]map[string]int{}
	err := r.insp.Results(context.Background(), func(res stream.Result) {
		feed, _, _ := strings.Cut(res.ID, "-")
		if codes[feed] == nil {
			codes[feed] = map[string]int{}
		}
		codes[feed][res.Code]++
		if res.Code != "ACCEPTED" {
			return
		}
		for i, p := range phases {
			if !res.At.Before(p.from) && res.At.Before(p.to) {
				perPhase[i][feed]++
			}
		}
	})
	if err != nil {
		r.tb.Fatal(err)
	}
	for i, p := range phases {
		for id := range perPhase[i] {
			perPhase[i][id] /= p.to.Sub(p.from).Seconds()
		}
	}
	return perPhase, codes
}

// table prints accepted/s and the ratio to the baseline (phase 0), per phase and feed.
func table(phases []phase, perPhase []map[string]float64, feeds []target) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %-9s %11s %9s\n", "phase", "feed", "accepted/s", "ratio")
	for i, p := range phases {
		for _, f := range feeds {
			id := f.name
			fmt.Fprintf(&b, "%-14s %-9s %11.1f %9.3f\n", p.name, id, perPhase[i][id], ratio(perPhase, i, id))
		}
	}
	return b.String()
}

// ratio is a provider's throughput in phase i over its baseline.
func ratio(perPhase []map[string]float64, i int, id string) float64 {
	if perPhase[0][id] == 0 {
		return 0
	}
	return perPhase[i][id] / perPhase[0][id]
}

// waitFor polls cond until it holds, failing after limit.
func waitFor(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis and the breaker log
	}
}

// sortedKeys is for printing maps in a stable order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
