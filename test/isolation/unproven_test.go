package isolation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// These scenarios measure a good self-hosted service's delivery rate through the fallback lane
// alone, and then beside hosts that were never seen answering: one host that stalls, answers
// 503 or answers 429 from its first request, or a stream of distinct hosts that each get one
// job and never answer (each seen once, so no host breaker ever trips). The good host must keep
// at least unprovenMinRatio of its rate alone in every case, measured in the same run.

// unprovenMinRatio is the least share of its rate alone the good host keeps beside the bad hosts.
const unprovenMinRatio = 0.90

// unprovenRegistry is a fallback lane with the product's in-flight cap, a rate the good host
// and one bad host together exceed, and a request timeout long enough that stalling hosts fed
// at the one-off rate would hold every slot.
const unprovenRegistry = "version: 1\ndefaults:\n" + testTimings + `host_breaker:
  failures: 3
  cooldown: 1s
providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
  - id: fallback
    kind: generic
    rate: 100
    burst: 20
    max_in_flight: 64
    timeout: 3s
    response_header_timeout: 3s
`

// unprovenCase is one kind of bad traffic: hosts (how many distinct ones; each job goes to the
// next, round robin), its fault, and its rate.
type unprovenCase struct {
	name    string
	hosts   int
	fault   pushsim.Fault
	arrival float64
}

var unprovenCases = []unprovenCase{
	{"stall", 1, pushsim.Fault{Kind: pushsim.Stall}, 40},
	{"503", 1, pushsim.Fault{Kind: pushsim.Fail, Status: 503}, 80},
	{"429", 1, pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 2 * time.Second}, 40},
	{"oneoff-stall", 2000, pushsim.Fault{Kind: pushsim.Stall}, 100},
}

const unprovenGoodArrival = 30.0

// playUnproven runs one case: the good host alone for phaseLen, then beside the bad hosts for
// badLen (the one-off case's hosts all get their job within it), then the bad hosts recover
// and every job must end with exactly one terminal record. It returns the good host's rate
// alone and beside the bad hosts.
func playUnproven(tb testing.TB, c unprovenCase, phaseLen, badLen time.Duration) (alone, beside float64, o outcome) {
	hosts := make([]string, c.hosts)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("push-%04d.unproven.example.net", i)
	}
	sc := scenario{
		targets:  []target{{name: "good", provider: pushsim.Generic, host: goodHost}},
		registry: unprovenRegistry,
		hosts:    hosts,
	}
	r := startRun(tb, sc)
	key := r.key.PublicKey()
	bad := make([]job.Subscription, len(hosts))
	for i, h := range hosts {
		s, err := r.sim.Subscribe(pushsim.Generic, h, key)
		if err != nil {
			tb.Fatal(err)
		}
		bad[i] = s
		if err := r.sim.SetHostFault(h, c.fault); err != nil {
			tb.Fatal(err)
		}
	}
	start := time.Now()
	badFrom := start.Add(2*time.Second + phaseLen) // a warm-up, then the good host alone
	if c.hosts > 1 {
		// One job per host, all within the phase.
		c.arrival = max(c.arrival, float64(c.hosts)/badLen.Seconds())
	}
	stop := r.feedUnproven(start, badFrom, c.arrival, bad, c.hosts)
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	phases := []phase{{name: "alone", from: time.Now()}}
	time.Sleep(time.Until(badFrom))
	phases[0].to = time.Now()
	p := phase{name: c.name, from: time.Now(), fault: c.fault.Kind.String()}
	time.Sleep(badLen)
	p.to = time.Now()
	phases = append(phases, p)
	stop()
	if c.hosts == 1 {
		if err := r.sim.SetHostFault(hosts[0], pushsim.Fault{}); err != nil {
			tb.Fatal(err)
		}
		o.audit = r.quiesceWithin(2 * time.Minute)
	} else {
		// The one-off hosts' jobs go on at the unproven hosts' share of the lane's rate, longer
		// than a test should wait: each must be somewhere, none lost.
		o.audit = r.audit()
	}
	o.phases = phases
	o.perPhase, o.codes = r.rates(phases)
	return o.perPhase[0]["good"], o.perPhase[1]["good"], o
}

// quiesceWithin waits up to limit until every job enqueued has a terminal record and returns
// the audit.
func (r *run) quiesceWithin(limit time.Duration) inspect.AuditReport {
	r.tb.Helper()
	r.mu.Lock()
	ids := append([]string(nil), r.ids...)
	r.mu.Unlock()
	var rep inspect.AuditReport
	waitFor(r.tb, limit, "a terminal record for every job", func() bool {
		var err error
		rep, _, err = r.insp.Audit(context.Background(), ids)
		if err != nil {
			r.tb.Fatal(err)
		}
		return rep.None == 0
	})
	return rep
}

// audit is the audit of every job enqueued, now.
//
// The worker is still sending while it looks, and the audit reads the ledger, the delayed set,
// the lanes and the pending lists one after the other: a job that moves between two of those
// reads (a stalled send's retry going from its lane to the delayed set) is seen in none. So a
// job counts as lost only when it is found nowhere in each of several audits: a lost job stays
// lost, while one in motion is found by the next look.
func (r *run) audit() inspect.AuditReport {
	r.tb.Helper()
	r.mu.Lock()
	ids := append([]string(nil), r.ids...)
	r.mu.Unlock()
	var rep inspect.AuditReport
	for try := 0; try < 5; try++ {
		var err error
		if rep, _, err = r.insp.Audit(context.Background(), ids); err != nil {
			r.tb.Fatal(err)
		}
		if rep.NoneWhere["nowhere"] == 0 {
			return rep
		}
		time.Sleep(200 * time.Millisecond)
	}
	return rep
}

// feedUnproven enqueues the good host's jobs at unprovenGoodArrival from start, and from
// badFrom the bad hosts' at badArrival, each to the next of bad (one job per host when there
// are hosts of them), until stop.
func (r *run) feedUnproven(start, badFrom time.Time, badArrival float64, bad []job.Subscription, limit int) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		good, badN := 0, 0
		for {
			now := time.Now()
			var lines [][]byte
			var ids []string
			add := func(id string, sub job.Subscription) {
				line, err := json.Marshal(map[string]any{"id": id, "subscription": sub,
					"payload": `{"title":"Your order shipped","body":"Order 4417 arrives Thursday."}`, "ttl": 3600})
				if err != nil {
					panic(err)
				}
				lines, ids = append(lines, line), append(ids, id)
			}
			for due := int(now.Sub(start).Seconds() * unprovenGoodArrival); good < due; good++ {
				add(fmt.Sprintf("good-%06d", good), r.subs["good"][good%len(r.subs["good"])])
			}
			if now.After(badFrom) {
				for due := int(now.Sub(badFrom).Seconds() * badArrival); badN < due && (limit <= 1 || badN < limit); badN++ {
					add(fmt.Sprintf("bad-%06d", badN), bad[badN%len(bad)])
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

// TestUnprovenHostsCannotTakeTheFallbackLane: beside one host that stalls, answers 503 or
// answers 429 from its first job, or beside 2,000 distinct hosts that each get one job and
// never answer, a good self-hosted service keeps at least 90 % of the rate it has alone. Once
// the one bad host recovers, every job ends with exactly one terminal record; the one-off
// hosts' jobs are all somewhere (none lost, none recorded twice) when the test ends.
func TestUnprovenHostsCannotTakeTheFallbackLane(t *testing.T) {
	for _, c := range unprovenCases {
		t.Run(c.name, func(t *testing.T) {
			alone, beside, o := playUnproven(t, c, 8*time.Second, 20*time.Second)
			got := beside / alone
			t.Logf("good host alone %.1f/s, beside %s %.1f/s: %.3f; ledger codes %v", alone, c.name, beside, got, o.codes)
			if alone == 0 || got < unprovenMinRatio {
				t.Errorf("beside %s the good host kept %.3f of its rate alone (%.1f/s of %.1f/s), want at least %.2f",
					c.name, got, beside, alone, unprovenMinRatio)
			}
			a := o.audit
			if c.hosts == 1 && a.ExactlyOne != a.Total {
				t.Errorf("audit: %d jobs, %d with exactly one terminal record, want all once the bad host recovered", a.Total, a.ExactlyOne)
			}
			if a.MoreThanOne != 0 || a.NoneWhere["nowhere"] != 0 {
				t.Errorf("audit: %d jobs with more than one terminal record (%v), %d lost", a.MoreThanOne, a.Duplicated, a.NoneWhere["nowhere"])
			}
			if n := o.codes["good"]["ACCEPTED"]; n != o.codesTotal("good") {
				t.Errorf("good host: %v, want every job ACCEPTED", o.codes["good"])
			}
		})
	}
}

func (o outcome) codesTotal(feed string) int {
	n := 0
	for _, c := range o.codes[feed] {
		n += c
	}
	return n
}
