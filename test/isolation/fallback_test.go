package isolation_test

import (
	"context"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// The fallback lane carries every host no registry entry lists: client-supplied, one lane for
// all. These scenarios feed two self-hosted services through it at steady rates, make one of
// them misbehave, and measure the other's delivery rate against the baseline in which both are
// healthy.

const (
	goodHost = "push.good.example.org"
	badHost  = "push.bad.example.org"
)

// fallbackRegistry gives the fallback lane a rate far above the feeds' (so a healthy host's
// throughput is its arrival rate), the product's in-flight cap, the testTimings, and
// host-breaker settings short enough for a test.
const fallbackRegistry = "version: 1\ndefaults:\n" + testTimings + `host_breaker:
  failures: 3
  cooldown: 1s
providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
  - id: fallback
    kind: generic
    rate: 400
    burst: 100
    max_in_flight: 32
`

// fallbackScenario is two unknown hosts fed at arrival jobs a second each.
func fallbackScenario(arrival float64, phaseLen time.Duration) scenario {
	return scenario{
		arrival:  map[string]float64{"good": arrival, "bad": arrival},
		targets:  []target{{name: "good", provider: pushsim.Generic, host: goodHost}, {name: "bad", provider: pushsim.Generic, host: badHost}},
		registry: fallbackRegistry,
		warmup:   2 * time.Second,
		phase:    phaseLen,
	}
}

// fallbackFaults are what the bad host does in turn: 503 to everything, 429 with a Retry-After,
// and a stall until the client's timeout.
var fallbackFaults = []struct {
	name  string
	fault pushsim.Fault
}{
	{"bad-503", pushsim.Fault{Kind: pushsim.Fail, Status: 503}},
	{"bad-429", pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 2 * time.Second}},
	{"bad-stall", pushsim.Fault{Kind: pushsim.Stall}},
}

// playFallback runs the scenario: baseline, then each fault on the bad host followed by its
// recovery (its backlog drained), then every job must reach exactly one terminal record.
func playFallback(tb testing.TB, sc scenario) (phases []phase, perPhase []map[string]float64, o outcome) {
	r := startRun(tb, sc)
	stop := r.feed()
	time.Sleep(sc.warmup)
	set := func(f pushsim.Fault) error { return r.sim.SetHostFault(badHost, f) }
	phases = append(phases, r.measureWith("baseline", pushsim.Fault{}, set))
	for _, f := range fallbackFaults {
		p := r.measureWith(f.name, f.fault, set)
		phases = append(phases, p)
		waitFor(tb, time.Minute, "the bad host's backlog drained after "+f.name, func() bool {
			c, err := r.insp.Counts(context.Background())
			return err == nil && c["lane:fallback"] <= 2 && c["delayed"] == 0
		})
	}
	stop()
	o.audit = r.quiesce()
	perPhase, o.codes = r.rates(phases)
	return phases, perPhase, o
}

// TestFallbackIsolatesHosts: a good self-hosted service keeps at least 95 % of its delivery
// rate while another unknown host answers 503 to everything, answers 429 with Retry-After, or
// stalls; once the bad host recovers its jobs are delivered too (every job ends ACCEPTED). It
// runs direct and through a CONNECT proxy: the host breaker and the unproven hosts' pool see
// the hosts behind the proxy as they see them direct.
func TestFallbackIsolatesHosts(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sc := fallbackScenario(30, 5*time.Second)
			sc.viaProxy = path.viaProxy
			phases, perPhase, o := playFallback(t, sc)
			t.Logf("\n%s", table(phases, perPhase, sc.feeds()))
			checkFallback(t, phases, perPhase, o)
		})
	}
}

func checkFallback(tb testing.TB, phases []phase, perPhase []map[string]float64, o outcome) {
	tb.Helper()
	for i, p := range phases[1:] {
		if got := ratio(perPhase, i+1, "good"); got < minRatio {
			tb.Errorf("%s: the good host kept %.3f of its baseline delivery rate, want at least %.2f", p.name, got, minRatio)
		}
	}
	o.checkEveryJobAccepted(tb, "host")
}

// BenchmarkFallbackIsolation is the same proof at twice the load with 10 s phases; it reports
// the good host's ratio to its baseline in each fault phase.
//
//	go test -run '^$' -bench BenchmarkFallbackIsolation -benchtime 1x ./test/isolation/
func BenchmarkFallbackIsolation(b *testing.B) {
	sc := fallbackScenario(60, 10*time.Second)
	for range b.N {
		phases, perPhase, o := playFallback(b, sc)
		b.Logf("\n%s", table(phases, perPhase, sc.feeds()))
		checkFallback(b, phases, perPhase, o)
		b.ReportMetric(perPhase[0]["good"], "good-baseline-accepted/s")
		for i, p := range phases[1:] {
			b.ReportMetric(ratio(perPhase, i+1, "good"), "good-"+p.name+"-ratio")
		}
	}
}
