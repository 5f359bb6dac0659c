package isolation_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// minRatio is the least share of its baseline throughput a healthy provider must keep while
// Autopush misbehaves.
const minRatio = 0.95

// outcome is what one run of a scenario measured.
type outcome struct {
	phases   []phase
	perPhase []map[string]float64 // accepted/s by provider, per phase
	codes    map[string]map[string]int
	audit    inspect.AuditReport
	opened   map[string]bool // fault phase name -> Autopush's breaker opened during it
	breakers string
	load     string
}

// play runs the scenario: warm-up, healthy baseline, Autopush stalled, recovery, Autopush
// failing 40 % with 503, recovery, then the feeder stops and every job must reach exactly one
// terminal record. Waiting for the recoveries fails the test if Autopush's breaker does not
// close again once the fault is cleared.
func (sc scenario) play(tb testing.TB) outcome {
	r := startRun(tb, sc)
	start := time.Now()
	stop := r.feed()
	time.Sleep(sc.warmup) // connections and caches warm before the baseline

	var o outcome
	o.opened = map[string]bool{}
	o.phases = append(o.phases, r.measure("baseline", pushsim.Fault{}))
	// Stall: every request hangs until the client's 1 s timeout.
	stall := r.measure("autopush-stall", pushsim.Fault{Kind: pushsim.Stall})
	o.phases = append(o.phases, stall)
	r.recovered(stall.to)
	// Fail: 40 % of requests answer 503 (Retry-After: 1, so the failed jobs come back within the
	// test; Autopush's own shape says 120 s).
	fail := r.measure("autopush-503", pushsim.Fault{Kind: pushsim.Fail, Status: 503, Ratio: 0.4, RetryAfter: time.Second})
	o.phases = append(o.phases, fail)
	r.recovered(fail.to)
	stop()
	o.audit = r.quiesce()

	for _, p := range o.phases[1:] {
		o.opened[p.name] = r.breakers.OpenedIn("autopush", p.from, p.to)
	}
	o.perPhase, o.codes = r.rates(o.phases)
	o.breakers = r.breakers.Summary(start)
	var load []string
	for _, id := range allProviders {
		load = append(load, fmt.Sprintf("%s %g/s (bucket %g/s)", id, sc.arrival[id], sc.arrival[id]*sc.bucket))
	}
	o.load = strings.Join(load, ", ")
	return o
}

// check fails tb unless the outcome shows isolation: the healthy providers at minRatio of their
// baseline or better in both fault phases, Autopush's breaker opened in both, every job exactly
// one terminal record and every job ACCEPTED.
func (o outcome) check(tb testing.TB) {
	tb.Helper()
	for i, p := range o.phases {
		if i == 0 {
			continue
		}
		for _, id := range healthy {
			if got := ratio(o.perPhase, i, id); got < minRatio {
				tb.Errorf("%s: %s kept %.3f of its baseline throughput, want at least %.2f", p.name, id, got, minRatio)
			}
		}
		if !o.opened[p.name] {
			tb.Errorf("%s: autopush's breaker did not open", p.name)
		}
	}
	o.checkEveryJobAccepted(tb, "provider")
}

// checkEveryJobAccepted fails tb unless every job has exactly one terminal record and every
// one ended ACCEPTED: once the misbehaving host or provider (what) recovered, its jobs were
// delivered too.
func (o outcome) checkEveryJobAccepted(tb testing.TB, what string) {
	tb.Helper()
	a := o.audit
	if a.ExactlyOne != a.Total || a.None != 0 || a.MoreThanOne != 0 {
		tb.Errorf("audit: %d jobs, %d with exactly one terminal record, %d with none (%v), %d with more (%v)",
			a.Total, a.ExactlyOne, a.None, a.NoneWhere, a.MoreThanOne, a.Duplicated)
	}
	for _, feed := range sortedKeys(o.codes) {
		for _, code := range sortedKeys(o.codes[feed]) {
			if code != "ACCEPTED" {
				tb.Errorf("%s: %d jobs ended %s, want every job ACCEPTED once its %s recovered", feed, o.codes[feed][code], code, what)
			}
		}
	}
}

func (o outcome) report() string {
	return fmt.Sprintf("load: %s\n%sbreaker changes: %s\naudit: %d jobs, %d with exactly one terminal record, %d lost, %d duplicated\n",
		o.load, table(o.phases, o.perPhase, scenario{}.feeds()), o.breakers, o.audit.Total, o.audit.ExactlyOne, o.audit.None, o.audit.MoreThanOne)
}

// isolationScenario feeds the four providers load times 100 jobs a second (FCM 40 %, the others
// 20 % each), their buckets at three times that.
func isolationScenario(load float64, warmup, phase time.Duration) scenario {
	return scenario{
		arrival: map[string]float64{"fcm": 40 * load, "autopush": 20 * load, "apple": 20 * load, "wns": 20 * load},
		bucket:  3,
		warmup:  warmup,
		phase:   phase,
	}
}

// TestIsolation is the proof in the test suite: 100 jobs a second over the four providers,
// 6 s phases, about 30 s in all (race detector included).
//
// Jobs caught in a fault end ACCEPTED: a stalled send times out (TRANSPORT_ERROR) and a 503 is
// PROVIDER_DOWN, both retried after a short backoff with TTLs of an hour, and the breaker
// keeps the others waiting in Redis without spending attempts, so once Autopush recovers every
// job is delivered. A terminal ACCEPTED record for every job is the stronger check than
// EXPIRED would be: it shows nothing was dropped on the way, not only that something was
// written.
func TestIsolation(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sc := isolationScenario(1, 2*time.Second, 6*time.Second)
			sc.viaProxy = path.viaProxy
			o := sc.play(t)
			t.Logf("\n%s", o.report())
			o.check(t)
		})
	}
}

// paths are the two ways out the isolation tests take: direct, and through a CONNECT proxy.
var paths = []struct {
	name     string
	viaProxy bool
}{{"direct", false}, {"proxy", true}}

// BenchmarkIsolation is the same proof at four times the load and with 15 s phases; it
// reports each provider's throughput ratio to its baseline in both fault phases. One run of
// the scenario per b.N.
//
//	go test -run '^$' -bench BenchmarkIsolation -benchtime 1x ./test/isolation/
func BenchmarkIsolation(b *testing.B) {
	sc := isolationScenario(4, 3*time.Second, 15*time.Second)
	for range b.N {
		o := sc.play(b)
		b.Logf("\n%s", o.report())
		o.check(b)
		for i, p := range o.phases {
			if i == 0 {
				b.ReportMetric(sum(o.perPhase[0]), "baseline-accepted/s")
				continue
			}
			for _, id := range allProviders {
				b.ReportMetric(ratio(o.perPhase, i, id), id+"-"+strings.TrimPrefix(p.name, "autopush-")+"-ratio")
			}
		}
	}
}

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}
