package dispatch

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// TestMetricsFollowTheRun: after a known run the counters agree with the ledger (accepted
// sends equal ACCEPTED records), a provider whose breaker opened reads 2, dead letters are
// counted by reason, the fallback lane's jobs count as unknown authorities, and the queue
// gauges come from the statistics loop.
func TestMetricsFollowTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{wallClock: true, registry: testRegistry(map[string]string{"apple": "breaker: {cooldown: 30s}"})})
	reg := telemetry.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.MetricsOptions{Providers: e.reg.IDs(), Keys: []string{"default"}, Version: "test", GoVersion: "go"})
	if err != nil {
		t.Fatal(err)
	}
	fcm := e.subscribe(pushsim.FCM, e.key)
	apple := e.subscribe(pushsim.Apple, e.key)
	unknown := e.subscribeAt(pushsim.Generic, genericHost, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	cfg := e.config(e.store)
	cfg.Metrics, cfg.StatsEvery = m, 50*time.Millisecond
	cfg.Signatures = e.sender.SignaturesByKey
	for i := range 20 {
		e.enqueue(job("fcm-"+strconv.Itoa(i), fcm, "x"))
		e.enqueue(job("apple-"+strconv.Itoa(i), apple, "x"))
	}
	e.enqueue(job("self-hosted", unknown, "x"), job("bad", fcm, "x", "ttl", -1))
	e.start(cfg)
	waitFor(t, "apple's breaker open", func() bool {
		v, ok := metricstest.Gather(t, reg).Lookup(telemetry.BreakerStateMetric, "provider", "apple")
		return ok && v == 2
	})
	for i := range 20 {
		e.waitRecord("results", "fcm-"+strconv.Itoa(i))
	}
	e.waitRecord("results", "self-hosted")
	e.waitRecord("dead", "bad")

	accepted := 0
	for _, r := range e.all("results") {
		if r["code"] == "ACCEPTED" && r["provider"] == "fcm" {
			accepted++
		}
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.SendsTotal, "provider", "fcm", "class", "transactional", "code", "ACCEPTED"); int(got) != accepted || accepted != 20 {
		t.Errorf("sends_total{fcm,ACCEPTED} = %v, ledger ACCEPTED for fcm = %d; want both 20", got, accepted)
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.JobsFinishedTotal, "provider", "fcm", "class", "transactional", "code", "ACCEPTED"); got != 20 {
		t.Errorf("jobs_finished_total{fcm,ACCEPTED} = %v, want 20", got)
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.SendsTotal, "provider", "apple", "class", "transactional", "code", "PROVIDER_DOWN"); got < 1 {
		t.Errorf("sends_total{apple,PROVIDER_DOWN} = %v, want some", got)
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.RetriesScheduledTotal, "provider", "apple", "code", "PROVIDER_DOWN"); got < 1 {
		t.Errorf("retries_scheduled_total{apple,PROVIDER_DOWN} = %v, want some", got)
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.BreakerTransitions, "provider", "apple", "to", "open"); got != 1 {
		t.Errorf("breaker_transitions_total{apple,open} = %v, want 1", got)
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.DeadLettersTotal, "reason", string(telemetry.DeadInvalidJob)); got != 1 {
		t.Errorf("dead_letters_total{invalid_job} = %v, want 1", got)
	}
	if got := metricstest.Gather(t, reg).Value(t, telemetry.UnknownAuthorityTotal); got != 1 {
		t.Errorf("unknown_authority_total = %v, want 1", got)
	}
	waitFor(t, "the queue gauges", func() bool {
		n, err := testutil.GatherAndCount(reg, telemetry.QueueEntries)
		return err == nil && n > 0
	})
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP webpush_replicas Live replicas of the worker, as the heartbeat counts them. The same on every replica: aggregate with max.
# TYPE webpush_replicas gauge
webpush_replicas 1
`), telemetry.Replicas); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestMetricsByClass: a transactional and a bulk job sent to the same provider are each counted
// under their own class (sends and finished jobs, nothing under the other), the wait histogram
// gets one observation per class with the wait from each job's enqueued_at, and a scheduled job
// counts its wait from its send_at. The queue gauges of the statistics loop carry each lane's
// class, and none on the intake.
func TestMetricsByClass(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	reg := telemetry.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.MetricsOptions{Providers: e.reg.IDs(), Keys: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	sub := e.subscribe(pushsim.FCM, e.key)
	start := e.clock.Now()
	e.enqueue(
		job("reset", sub, "your code"),
		job("digest", sub, "this week", "class", "bulk", "enqueued_at", start.Add(-90*time.Second).UnixMilli()),
	)
	cfg := e.config(e.store)
	cfg.Metrics, cfg.StatsEvery = m, 50*time.Millisecond
	e.start(cfg)
	for _, id := range []string{"reset", "digest"} {
		if r := e.waitRecord("results", id); r["code"] != "ACCEPTED" {
			t.Fatalf("%s: %v, want ACCEPTED", id, r)
		}
	}

	counted := func(name, class string) float64 {
		return metricstest.Gather(t, reg).Value(t, name, "provider", "fcm", "class", class, "code", "ACCEPTED")
	}
	for _, name := range []string{telemetry.SendsTotal, telemetry.JobsFinishedTotal} {
		if tx, bulk := counted(name, "transactional"), counted(name, "bulk"); tx != 1 || bulk != 1 {
			t.Errorf("%s{fcm,ACCEPTED}: transactional %v, bulk %v; want 1 each", name, tx, bulk)
		}
	}
	// On the stepped clock the transactional job is sent at the very time intake read it, and
	// the bulk one 90 s after the enqueued_at it gave.
	if h := waitHistogram(t, reg, "fcm", "transactional"); h.GetSampleCount() != 1 || h.GetSampleSum() != 0 {
		t.Errorf("transactional wait: %d observations summing to %vs, want one of 0s", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := waitHistogram(t, reg, "fcm", "bulk"); h.GetSampleCount() != 1 || h.GetSampleSum() != 90 || bucketCount(h, 60) != 0 || bucketCount(h, 120) != 1 {
		t.Errorf("bulk wait: %d observations summing to %vs (%d up to 60s, %d up to 120s), want one of 90s in the bucket up to 120s",
			h.GetSampleCount(), h.GetSampleSum(), bucketCount(h, 60), bucketCount(h, 120))
	}

	e.enqueue(job("reminder", sub, "at nine", "send_at", start.Add(30*time.Second).UnixMilli()))
	waitFor(t, "the scheduled job in the delayed set", func() bool {
		_, ok := e.delayedDue("reminder")
		return ok
	})
	e.clock.Step(45 * time.Second)
	e.waitRecord("results", "reminder")
	if h := waitHistogram(t, reg, "fcm", "transactional"); h.GetSampleCount() != 2 || h.GetSampleSum() != 15 {
		t.Errorf("transactional wait after the scheduled job: %d observations summing to %vs, want 2 summing to 15s (sent 15s after its send_at)",
			h.GetSampleCount(), h.GetSampleSum())
	}
	if h := waitHistogram(t, reg, "fcm", "bulk"); h.GetSampleCount() != 1 {
		t.Errorf("bulk wait: %d observations after a transactional send, want still 1", h.GetSampleCount())
	}

	waitFor(t, "the queue gauges of both lanes", func() bool {
		_, tx := metricstest.Gather(t, reg).Lookup(telemetry.QueueEntries, "stream", "lane:fcm", "class", "transactional")
		_, bulk := metricstest.Gather(t, reg).Lookup(telemetry.QueueEntries, "stream", "lane:fcm:bulk", "class", "bulk")
		return tx && bulk
	})
	if _, ok := metricstest.Gather(t, reg).Lookup(telemetry.QueueLagEntries, "stream", "intake", "class", ""); !ok {
		t.Error("no intake lag series with an empty class")
	}
}

// waitHistogram is the webpush_send_wait_seconds series of provider and class in reg.
func waitHistogram(t *testing.T, reg prometheus.Gatherer, provider, class string) *dto.Histogram {
	t.Helper()
	for _, s := range metricstest.Gather(t, reg)[telemetry.SendWaitSeconds].GetMetric() {
		got := map[string]string{}
		for _, l := range s.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["provider"] == provider && got["class"] == class {
			return s.GetHistogram()
		}
	}
	t.Fatalf("no %s series for provider %s, class %s", telemetry.SendWaitSeconds, provider, class)
	return nil
}

// bucketCount is the classic bucket count of h up to upper.
func bucketCount(h *dto.Histogram, upper float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == upper {
			return b.GetCumulativeCount()
		}
	}
	return 0
}
