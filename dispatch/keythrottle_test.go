package dispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// TestOneKeysRetryAfterParksOnlyThatKey: FCM throttles one sender (VAPID key "a") with 429 and
// Retry-After: 86400, as Chrome does to a site it judges disruptive. Key "b"'s jobs on the same
// provider keep at least 90 % of the rate they have alone, FCM's breaker stays closed, and key
// "a"'s jobs wait in the delayed set until the Retry-After ends: none dead, none sent twice.
func TestOneKeysRetryAfterParksOnlyThatKey(t *testing.T) {
	const perPhase = 1000
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{
		"fcm": "rate: 125\nburst: 12\nmax_in_flight: 64",
	})})
	keyA, err := vapid.GenerateKey("a")
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := vapid.GenerateKey("b")
	if err != nil {
		t.Fatal(err)
	}
	subA, subB := e.subscribe(pushsim.FCM, keyA), e.subscribe(pushsim.FCM, keyB)
	reg := telemetry.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.MetricsOptions{Providers: e.reg.IDs(), Keys: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := metricstest.Gather(t, reg).Value(t, telemetry.KeyThrottled, "provider", "fcm", "key", "a"); v != 0 {
		t.Errorf("%s{fcm,a} = %v before any send, want 0", telemetry.KeyThrottled, v)
	}
	cfg := e.config(e.store)
	cfg.Keys = map[string]*vapid.Key{"a": keyA, "b": keyB}
	cfg.Metrics = m
	var (
		mu     sync.Mutex
		opened []string
	)
	cfg.OnBreakerChange = func(name string, _, to limits.State) {
		if to == limits.Open {
			mu.Lock()
			opened = append(opened, name)
			mu.Unlock()
		}
	}
	e.start(cfg)

	const ttl = 2 * 86400 // outlives the Retry-After
	batch := func(prefix string) []string {
		var ids []string
		for i := range perPhase {
			ids = append(ids, fmt.Sprintf("%s-%d", prefix, i))
		}
		return ids
	}
	enqueueB := func(ids []string, alsoA []string) {
		var jobs [][]byte
		for i, id := range ids {
			jobs = append(jobs, job(id, subB, "x", "vapid_key", "b", "ttl", ttl))
			if i < len(alsoA) {
				jobs = append(jobs, job(alsoA[i], subA, "x", "vapid_key", "a", "ttl", ttl))
			}
		}
		e.enqueue(jobs...)
	}

	alone := batch("alone")
	enqueueB(alone, nil)
	rateAlone, got := e.keyRate(alone, 60*time.Second)
	if got < perPhase {
		t.Fatalf("key b alone: %d of %d accepted", got, perPhase)
	}

	if err := e.sim.SetKeyFault(keyA.PublicKey(), pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	throttledAt := time.Now()
	beside := batch("beside")
	parked := batch("parked")
	enqueueB(beside, parked)
	rateBeside, got := e.keyRate(beside, 60*time.Second)
	t.Logf("key b on fcm: %.0f jobs/s alone, %.0f jobs/s beside key a's 429 + Retry-After: 86400 (%d of %d accepted)",
		rateAlone, rateBeside, got, perPhase)
	if got < perPhase || rateBeside < 0.9*rateAlone {
		t.Errorf("key b kept %.0f jobs/s (%d of %d accepted) beside key a's throttle, want at least 90 %% of %.0f",
			rateBeside, got, perPhase, rateAlone)
	}
	mu.Lock()
	if len(opened) > 0 {
		t.Errorf("breakers opened: %v; one key's 429 must not open the provider's", opened)
	}
	mu.Unlock()

	// Key a's jobs are parked: every one in the delayed set, due no sooner than the
	// Retry-After's end, none dead or recorded, none sent twice.
	waitFor(t, "key a's jobs in the delayed set", func() bool {
		for _, id := range parked {
			if _, ok := e.delayedDue(id); !ok {
				return false
			}
		}
		return true
	})
	results, dead := e.byID("results"), e.byID("dead")
	sentA := 0
	for _, id := range parked {
		if len(results[id]) > 0 || len(dead[id]) > 0 {
			t.Errorf("%s: records %v %v; a parked job has none", id, results[id], dead[id])
		}
		due, _ := e.delayedDue(id)
		if due.Before(throttledAt.Add(24*time.Hour - time.Minute)) {
			t.Errorf("%s due %v after the throttle, want the Retry-After's 24 h", id, due.Sub(throttledAt))
		}
		n := len(e.deliveriesOf(id))
		if n > 1 {
			t.Errorf("%s sent %d times before the Retry-After ended", id, n)
		}
		sentA += n
	}
	t.Logf("key a: %d of its %d jobs sent (each got the 429), the rest parked unsent", sentA, perPhase)

	// Visible: the gauges name key a on fcm, and the operators' status lists its park, which
	// the heartbeat wrote for the fleet.
	g := metricstest.Gather(t, reg)
	if v := g.Value(t, telemetry.KeyThrottled, "provider", "fcm", "key", "a"); v != 1 {
		t.Errorf("%s{fcm,a} = %v, want 1", telemetry.KeyThrottled, v)
	}
	if v := g.Value(t, telemetry.KeyThrottled, "provider", "fcm", "key", "b"); v != 0 {
		t.Errorf("%s{fcm,b} = %v, want 0", telemetry.KeyThrottled, v)
	}
	if v := g.Value(t, telemetry.KeyParkedUntilSeconds, "provider", "fcm", "key", "a"); v < float64(throttledAt.Add(24*time.Hour-time.Minute).Unix()) {
		t.Errorf("%s{fcm,a} = %v, want the Retry-After's end", telemetry.KeyParkedUntilSeconds, v)
	}
	insp := inspect.New(e.redis.Client(t), stream.Options{Prefix: prefix, Shards: e.shards})
	var rep inspect.StatusReport
	waitFor(t, "key a's park in the status", func() bool {
		rep, err = insp.Status(context.Background(), 5*time.Second, time.Now())
		return err == nil && len(rep.KeyParks) == 1
	})
	if p := rep.KeyParks[0]; p.Provider != "fcm" || p.Key != "a" || p.Until.Before(throttledAt.Add(24*time.Hour-time.Minute)) {
		t.Errorf("status key parks %+v, want fcm/a until the Retry-After's end", rep.KeyParks)
	}
}

// keyRate waits up to bound for ids to be accepted and returns their rate at pushsim, first to
// last accepted delivery, and how many were accepted.
func (e *env) keyRate(ids []string, bound time.Duration) (float64, int) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(bound)
	for {
		var first, last time.Time
		n := 0
		for _, d := range e.sim.Deliveries() {
			if !want[d.JobID] || d.Code != "ACCEPTED" {
				continue
			}
			n++
			if first.IsZero() || d.At.Before(first) {
				first = d.At
			}
			if d.At.After(last) {
				last = d.At
			}
		}
		if n >= len(ids) || time.Now().After(deadline) {
			if n < 2 {
				return 0, n
			}
			return float64(n-1) / last.Sub(first).Seconds(), n
		}
		time.Sleep(20 * time.Millisecond)
	}
}
