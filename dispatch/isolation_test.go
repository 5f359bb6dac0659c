package dispatch

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// The breaker tests run on the real clock. gobreaker reads time.Now itself, and these tests
// need a real Redis, TLS and HTTP/2 to pushsim: a testing/synctest bubble cannot host them
// (its fake clock only moves when every goroutine in it is blocked on the bubble, never while
// one waits for the network). So the registry's breaker window (2 s) and cooldown (1 s) are
// short and the tests poll for the breaker's state with a deadline. The breaker's own timing
// is tested by stepping the bubble's clock in limits/.

func TestBreakerOpensOnFailuresAndClosesAfterRecovery(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testBreakerOpensOnFailuresAndClosesAfterRecovery(t, path.viaProxy) })
	}
}

func testBreakerOpensOnFailuresAndClosesAfterRecovery(t *testing.T, viaProxy bool) {
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(nil), viaProxy: viaProxy})
	sub := e.subscribe(pushsim.Apple, e.key)
	// 40 % of requests fail; the breaker opens at 30 % once 10 outcomes are in its window.
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503, Ratio: 0.4, RetryAfter: time.Second})
	var bl registrytest.BreakerLog
	cfg := e.config(e.store)
	cfg.OnBreakerChange = bl.Hook
	cfg.Backoff = Backoff{Base: 200 * time.Millisecond, Cap: time.Second, MaxRetries: 30}
	e.start(cfg)
	stop := e.feed("apple", sub, 40)

	waitFor(t, "the apple breaker open", func() bool { return bl.Reached("apple", limits.Open) })
	setFault(t, e, pushsim.Apple, pushsim.Fault{})
	waitFor(t, "the apple breaker closed again", func() bool {
		cs := bl.Of("apple")
		return len(cs) > 1 && bl.State("apple") == limits.Closed
	})
	e.waitAccepted(stop())

	cs := bl.Of("apple")
	if first := cs[0]; first.From != limits.Closed || first.To != limits.Open {
		t.Errorf("first change %v -> %v, want closed -> open", first.From, first.To)
	}
	for i, c := range cs[1:] {
		if c.From != cs[i].To {
			t.Errorf("change %d goes from %v, but the breaker was %v", i+1, c.From, cs[i].To)
		}
		if c.To == limits.Closed && c.From != limits.HalfOpen {
			t.Errorf("closed from %v; a breaker closes only from half-open, after its probes", c.From)
		}
	}
	for _, p := range []string{"fcm", "autopush", "wns", "fallback"} {
		if n := len(bl.Of(p)); n != 0 {
			t.Errorf("%s breaker changed %d times; only apple failed", p, n)
		}
	}
}

func TestOpenBreakerLaneReadsNothing(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testOpenBreakerLaneReadsNothing(t, path.viaProxy) })
	}
}

func testOpenBreakerLaneReadsNothing(t *testing.T, viaProxy bool) {
	// A cooldown long enough to look at the lane while the breaker is open.
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{"apple": "breaker: {cooldown: 4s}"}), viaProxy: viaProxy})
	apple := e.subscribe(pushsim.Apple, e.key)
	fcm := e.subscribe(pushsim.FCM, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	var failed []string
	for i := range 10 {
		id := fmt.Sprintf("failed-%d", i)
		failed = append(failed, id)
		e.enqueue(job(id, apple, "x"))
	}
	var bl registrytest.BreakerLog
	cfg := e.config(e.store)
	cfg.OnBreakerChange = bl.Hook
	cfg.Backoff = Backoff{Base: 100 * time.Millisecond, Cap: 200 * time.Millisecond, MaxRetries: 30}
	e.start(cfg)
	waitFor(t, "the apple breaker open", func() bool { return bl.Reached("apple", limits.Open) })

	// The failed jobs wait to retry: in the lane once the delayed set gives them back, or in
	// the delayed set until the cooldown ends when the breaker refused them after they were
	// read (put back, not sent). New jobs join them, one with a TTL that runs out before the
	// breaker closes. Nothing is read meanwhile: the lane has no pending entry, pushsim sees
	// no request. The whole look fits in the 4 s cooldown.
	lane := e.store.Keys(0).Lane("apple")
	e.enqueue(job("new-0", apple, "x"), job("new-1", apple, "x"), job("short", apple, "x", "ttl", 1))
	e.enqueue(job("meanwhile", fcm, "other providers go on"))
	e.waitRecord("results", "meanwhile")
	waitFor(t, "the new apple jobs in the lane, nothing pending", func() bool { return e.xlen(lane) >= 3 && e.pending(lane) == 0 })
	sent := len(e.sentAt(pushsim.Apple))
	if sent != len(failed) {
		t.Errorf("pushsim saw %d apple requests before the breaker opened, want the %d that failed", sent, len(failed))
	}
	holds(t, time.Second, "an open breaker's lane reading nothing", func() bool {
		return bl.State("apple") == limits.Open && e.pending(lane) == 0 && len(e.sentAt(pushsim.Apple)) == sent
	})

	setFault(t, e, pushsim.Apple, pushsim.Fault{})
	waitFor(t, "the apple breaker closed", func() bool { return bl.State("apple") == limits.Closed })
	e.waitAccepted(append(failed, "new-0", "new-1"))
	// Waiting spent no attempt: each failed job was sent once more, each new job once.
	for _, id := range failed {
		if r := e.one("results", id); r["attempt"] != "1" {
			t.Errorf("%s accepted at attempt %s, want 1", id, r["attempt"])
		}
	}
	for _, id := range []string{"new-0", "new-1"} {
		if r := e.one("results", id); r["attempt"] != "0" {
			t.Errorf("%s accepted at attempt %s, want 0", id, r["attempt"])
		}
	}
	if r := e.waitRecord("results", "short"); r["code"] != "EXPIRED" || r["attempt"] != "0" {
		t.Errorf("short: %v, want EXPIRED at attempt 0", r)
	}
	if n := len(e.deliveriesOf("short")); n != 0 {
		t.Errorf("pushsim saw %d requests for the job that expired while the breaker was open", n)
	}
}

func TestStalledUnknownHostStopsHoldingFallbackSlots(t *testing.T) {
	hole := newBlackHole(t)
	const dead = "push.selfhosted.example.org"
	e := newEnv(t, envOptions{wallClock: true, connectTo: []string{net.JoinHostPort(dead, "443") + "=" + hole.addr()},
		registry: testRegistry(map[string]string{"fallback": `max_in_flight: 4
timeout: 1s
connect_timeout: 500ms
tls_timeout: 500ms
response_header_timeout: 800ms
breaker: {min_samples: 1000}`,
			// No probe within the test: what it counts is the connections before the host opens.
			"host_breaker": "failures: 3\ncooldown: 5m"})})
	stalled := e.subscribeAt(pushsim.Generic, dead, e.key)
	good := e.subscribe(pushsim.Generic, e.key)
	var stalledIDs, goodIDs []string
	for i := range 12 {
		id := fmt.Sprintf("stalled-%d", i)
		stalledIDs = append(stalledIDs, id)
		e.enqueue(job(id, stalled, "x"))
	}
	for i := range 12 {
		id := fmt.Sprintf("good-%d", i)
		goodIDs = append(goodIDs, id)
		e.enqueue(job(id, good, "x"))
	}
	cfg := e.config(e.store)
	cfg.Backoff.Base = time.Minute // the stalled host's retries stay in the delayed set
	e.start(cfg)

	// Without the host breaker the 12 stalled jobs would hold the lane's 4 slots for three
	// rounds of TLS timeouts before the first good job went.
	e.waitAccepted(goodIDs)
	waitFor(t, "every stalled job waiting to retry", func() bool {
		for _, id := range stalledIDs {
			if !e.retryWaits(id) {
				return false
			}
		}
		return true
	})
	// The stalled host's jobs take the lane's unproven pool (at most its 4 slots); each of the
	// first two failures frees a place for one more job before the third opens the host. Past
	// that, no connection: the other jobs are refused as CIRCUIT_OPEN as they are read, without
	// a place in the pool.
	if n := hole.accepted(); n < 3 || n > 4+2 {
		t.Errorf("the stalled host took %d connections of 12 jobs; want 3 to 6: after 3 transport failures "+
			"the rest must be refused without connecting", n)
	}
	if n := len(e.all("results")); n != len(goodIDs) {
		t.Errorf("%d ledger records, want the %d good jobs only", n, len(goodIDs))
	}
}

func TestRateLimitStormThrottlesAndRecovers(t *testing.T) {
	const arrival = 30.0 // jobs per second to apple; its bucket gives 40
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{
		// The breaker is kept out of the way (it would open on the 429s and stop the lane): this
		// test is about the bucket.
		"apple": "rate: 40\nburst: 4\nbreaker: {min_samples: 1000000}",
	})})
	sub := e.subscribe(pushsim.Apple, e.key)
	cfg := e.config(e.store)
	cfg.Backoff = Backoff{Base: 100 * time.Millisecond, Cap: 200 * time.Millisecond, MaxRetries: 30}
	e.start(cfg)
	stop := e.feed("apple", sub, arrival)

	time.Sleep(2 * time.Second) // the healthy phase the storm is compared with
	stormAt := time.Now()
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 5 * time.Second})
	time.Sleep(3 * time.Second) // the storm
	clearAt := time.Now()
	setFault(t, e, pushsim.Apple, pushsim.Fault{})

	// Recovered: one second in which apple took at least 90 % of the arrival rate.
	var recoveredAt time.Time
	waitFor(t, "the send rate back at the arrival rate", func() bool {
		ts := e.sentAt(pushsim.Apple)
		for at := clearAt; at.Add(time.Second).Before(time.Now()); at = at.Add(100 * time.Millisecond) {
			if countIn(ts, at, at.Add(time.Second)) >= int(0.9*arrival) {
				recoveredAt = at
				return true
			}
		}
		return false
	})
	ids := stop()
	e.waitAccepted(ids)

	ts := e.sentAt(pushsim.Apple)
	before := float64(countIn(ts, stormAt.Add(-time.Second), stormAt))
	during := float64(countIn(ts, clearAt.Add(-2*time.Second), clearAt)) / 2
	t.Logf("requests/s: %.0f before the storm, %.1f in its last 2 s; back at the arrival rate %.1f s after it",
		before, during, recoveredAt.Sub(clearAt).Seconds())
	if before < 0.9*arrival {
		t.Errorf("%.0f requests/s before the storm, want about %.0f", before, arrival)
	}
	if during > 0.25*arrival {
		t.Errorf("%.1f requests/s during the storm: the bucket was not cut", during)
	}
	// Every job throttled waits out its Retry-After.
	byJob := map[string][]pushsim.Delivery{}
	for _, d := range e.sim.Deliveries() {
		byJob[d.JobID] = append(byJob[d.JobID], d)
	}
	throttled := 0
	for id, ds := range byJob {
		for i := 1; i < len(ds); i++ {
			if ds[i-1].Code != "RATE_LIMITED" {
				continue
			}
			throttled++
			if gap := ds[i].At.Sub(ds[i-1].At); gap < 5*time.Second {
				t.Errorf("%s sent again %v after a 429 with Retry-After: 5", id, gap)
			}
		}
	}
	if throttled == 0 {
		t.Error("no job was throttled and sent again: the storm did not happen")
	}
}

func TestTwoReplicasShareAProviderRate(t *testing.T) {
	const fleetRate = 40.0
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{"apple": "rate: 40\nburst: 2"})})
	sub := e.subscribe(pushsim.Apple, e.key)
	var jobs [][]byte
	for i := range 600 { // more than the window can take: the lane never runs dry
		jobs = append(jobs, job(fmt.Sprintf("backlog-%d", i), sub, "x"))
	}
	e.enqueue(jobs...)
	e.start(e.config(e.store))
	e.start(e.config(e.newStore("w2")))

	// Both replicas count two live ones: each takes half the rate. The window starts two
	// seconds on, once the tokens each bucket held at the whole rate are spent.
	waitFor(t, "both replicas sharing the rate", func() bool { return strings.Count(e.logs.String(), "live=2") >= 2 })
	from := time.Now().Add(2 * time.Second)
	const window = 5 * time.Second
	waitFor(t, "the measuring window to pass", func() bool { return time.Now().After(from.Add(window + 200*time.Millisecond)) })
	n := countIn(e.sentAt(pushsim.Apple), from, from.Add(window))
	got := float64(n) / window.Seconds()
	t.Logf("two replicas sent %d requests in %v: %.1f/s for a fleet rate of %.0f/s", n, window, got, fleetRate)
	if got < 0.95*fleetRate || got > 1.05*fleetRate {
		t.Errorf("combined rate %.1f/s, want within 5%% of %.0f/s", got, fleetRate)
	}
}

func TestRetryShareAndRecipientCap(t *testing.T) {
	const hold = 300 * time.Millisecond // pushsim answers each request after this
	tests := []struct {
		name string
		// entries are written to the lane in this order before the worker starts.
		entries []laneSeed
		// limits on the concurrency pushsim sees, by group (a recipient, or "retries").
		most map[string]int
		// firstWave are the ids that must start with the first requests, not wait behind
		// entries that were put back.
		firstWave []string
	}{
		{
			name: "retries take at most their share",
			entries: append(entriesOf("retry", 6, func(i int) string { return fmt.Sprintf("r%d", i) }, 1),
				entriesOf("first", 2, func(i int) string { return fmt.Sprintf("f%d", i) }, 0)...),
			most:      map[string]int{"retries": 2, "all": 4},
			firstWave: []string{"first-0", "first-1"},
		},
		{
			name: "one recipient takes at most its cap",
			entries: append(entriesOf("alice", 6, func(int) string { return "alice" }, 0),
				entriesOf("bob", 2, func(int) string { return "bob" }, 0)...),
			most:      map[string]int{"alice": 2, "all": 4},
			firstWave: []string{"bob-0", "bob-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{
				"apple": "max_in_flight: 4\nretry_share: 0.5\nper_recipient_in_flight: 2",
			})})
			sub := e.subscribe(pushsim.Apple, e.key)
			setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Slow, Delay: hold})
			if err := e.store.Setup(context.Background(), []string{"apple"}); err != nil {
				t.Fatal(err)
			}
			group := map[string]string{}
			var ids []string
			for _, en := range tc.entries {
				e.laneEntry("apple", en.attempt, job(en.id, sub, "x", "recipient", en.recipient))
				ids = append(ids, en.id)
				group[en.id] = en.recipient
				if en.attempt > 0 {
					group[en.id] = "retries"
				}
			}
			e.start(e.config(e.store))
			e.waitAccepted(ids)

			ats := map[string][]time.Time{}
			var first time.Time
			for _, d := range e.sim.Deliveries() {
				ats[group[d.JobID]] = append(ats[group[d.JobID]], d.At)
				ats["all"] = append(ats["all"], d.At)
				if first.IsZero() || d.At.Before(first) {
					first = d.At
				}
			}
			for g, most := range tc.most {
				if got := maxOverlap(ats[g], hold); got > most {
					t.Errorf("%s: %d requests in flight at once, want at most %d", g, got, most)
				}
			}
			for _, id := range tc.firstWave {
				ds := e.deliveriesOf(id)
				if len(ds) != 1 || ds[0].At.Sub(first) >= hold {
					t.Errorf("%s was not sent with the first requests: it waited behind entries that were put back", id)
				}
			}
			// Put back, not retried: the ledger keeps each job's attempt.
			for _, en := range tc.entries {
				if r := e.one("results", en.id); r["attempt"] != fmt.Sprint(en.attempt) {
					t.Errorf("%s recorded at attempt %s, want %d: being put back is not an attempt", en.id, r["attempt"], en.attempt)
				}
			}
		})
	}
}

// laneSeed is a job written straight to a lane.
type laneSeed struct {
	id, recipient string
	attempt       int
}

// entriesOf are n lane entries with ids prefix-0..n-1, recipients from rcpt, at attempt.
func entriesOf(prefix string, n int, rcpt func(int) string, attempt int) []laneSeed {
	out := make([]laneSeed, n)
	for i := range out {
		out[i] = laneSeed{fmt.Sprintf("%s-%d", prefix, i), rcpt(i), attempt}
	}
	return out
}

func TestBudgetMovesSlotsToTheBusyProvider(t *testing.T) {
	extra := map[string]string{}
	for _, id := range []string{"fcm", "autopush", "apple", "wns", "fallback"} {
		extra[id] = "min_in_flight: 2"
	}
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(extra) + `budget:
  total_in_flight: 24
  every: 200ms
  half_life: 400ms
`})
	sub := e.subscribe(pushsim.FCM, e.key)
	// Every FCM request takes 500 ms: at 60 jobs a second FCM could use 30 slots.
	setFault(t, e, pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 500 * time.Millisecond})
	e.start(e.config(e.store))
	stop := e.feed("fcm", sub, 60)
	// The first round shares the 24 evenly (4 or 5 each); with FCM the only traffic, later
	// rounds give it its ceiling, 16, and the others their floor, 2.
	most := 0
	waitFor(t, "fcm at its ceiling of 16 in flight", func() bool {
		most = max(most, int(e.sim.Stats().InFlight))
		return most >= 16
	})
	holds(t, 500*time.Millisecond, "fcm never above its ceiling", func() bool { return e.sim.Stats().InFlight <= 16 })
	setFault(t, e, pushsim.FCM, pushsim.Fault{})
	e.waitAccepted(stop())
}

// TestPausedProviderWaitsInRedis: while an operator has paused a provider (state in Redis,
// read with every heartbeat), its lanes read nothing and its jobs wait, spending nothing, while
// the other providers flow; resumed, its jobs are delivered.
func TestPausedProviderWaitsInRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{registry: testRegistry(nil)})
	apple := e.subscribe(pushsim.Apple, e.key)
	fcm := e.subscribe(pushsim.FCM, e.key)
	if err := e.inspector().PauseProvider(context.Background(), inspect.Pause{Provider: "apple", Reason: "test", At: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	e.start(e.config(e.store))
	waitFor(t, "the pause seen", func() bool { return strings.Contains(e.logs.String(), "provider paused by an operator") })
	e.enqueue(job("held", apple, "x"), job("flows", fcm, "x"))
	e.waitRecord("results", "flows")
	lane := e.store.Keys(0).Lane("apple")
	holds(t, time.Second, "a paused provider's lane reading nothing", func() bool {
		return e.xlen(lane) == 1 && e.pending(lane) == 0 && len(e.deliveriesOf("held")) == 0
	})
	if _, err := e.inspector().ResumeProvider(context.Background(), "apple"); err != nil {
		t.Fatal(err)
	}
	if r := e.waitRecord("results", "held"); r["code"] != "ACCEPTED" || r["attempt"] != "0" {
		t.Errorf("held: %v, want ACCEPTED at attempt 0 once resumed", r)
	}
}
