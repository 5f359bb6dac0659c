package telemetry

import (
	"bytes"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// contractMetrics is the metric table of the contract between the worker and its deployment:
// name, type and labels.
var contractMetrics = map[string]struct {
	typ    string
	labels []string
}{
	"webpush_sends_total":                             {"COUNTER", []string{"class", "code", "provider"}},
	"webpush_send_duration_seconds":                   {"HISTOGRAM", []string{"provider"}},
	"webpush_send_wait_seconds":                       {"HISTOGRAM", []string{"class", "provider"}},
	"webpush_inflight_requests":                       {"GAUGE", []string{"provider"}},
	"webpush_inflight_limit":                          {"GAUGE", []string{"provider"}},
	"webpush_rate_limit_per_second":                   {"GAUGE", []string{"provider"}},
	"webpush_breaker_state":                           {"GAUGE", []string{"provider"}},
	"webpush_breaker_transitions_total":               {"COUNTER", []string{"provider", "to"}},
	"webpush_jobs_finished_total":                     {"COUNTER", []string{"class", "code", "provider"}},
	"webpush_retries_scheduled_total":                 {"COUNTER", []string{"code", "provider"}},
	"webpush_dead_letters_total":                      {"COUNTER", []string{"reason"}},
	"webpush_unknown_authority_total":                 {"COUNTER", nil},
	"webpush_vapid_signatures_total":                  {"COUNTER", []string{"key"}},
	"webpush_queue_entries":                           {"GAUGE", []string{"class", "shard", "stream"}},
	"webpush_queue_lag_entries":                       {"GAUGE", []string{"class", "shard", "stream"}},
	"webpush_oldest_pending_age_seconds":              {"GAUGE", []string{"class", "shard", "stream"}},
	"webpush_queue_stats_refreshed_timestamp_seconds": {"GAUGE", nil},
	"webpush_replicas":                                {"GAUGE", nil},
	"webpush_redis_errors_total":                      {"COUNTER", []string{"op"}},
	"webpush_registry_reload_success":                 {"GAUGE", nil},
	"webpush_registry_reload_timestamp_seconds":       {"GAUGE", nil},
	"webpush_build_info":                              {"GAUGE", []string{"goversion", "version"}},
	"webpush_provider_paused":                         {"GAUGE", []string{"provider"}},
	"webpush_hosts_tracked":                           {"GAUGE", []string{"provider"}},
	"webpush_hosts_open":                              {"GAUGE", []string{"provider"}},
	"webpush_hosts_throttled":                         {"GAUGE", []string{"provider"}},
	"webpush_key_throttled":                           {"GAUGE", []string{"key", "provider"}},
	"webpush_key_parked_until_seconds":                {"GAUGE", []string{"key", "provider"}},
}

var (
	testProviders = []string{"fcm", "autopush", "apple", "wns", "fallback"}
	testKeys      = []string{"main", "legacy"}
	t0            = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// newTestMetrics registers Metrics for testProviders and testKeys on a fresh registry (with the
// Go and process collectors, as in the worker).
func newTestMetrics(t *testing.T) (*prometheus.Registry, *Metrics) {
	t.Helper()
	reg := NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{
		Providers: testProviders, Keys: testKeys, Version: "v1.2.3", GoVersion: "go1.26.8",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

// populate calls every recording method, so that every series of the contract exists.
func populate(m *Metrics) {
	m.SendWait("fcm", ClassTransactional, 30*time.Millisecond)
	m.Send("fcm", ClassTransactional, "ACCEPTED", 120*time.Millisecond, "job-1")
	m.SendWait("fcm", ClassBulk, 90*time.Second)
	m.Send("fcm", ClassBulk, "PROVIDER_DOWN", 2*time.Second, "")
	m.BreakerTransition("fcm", "open")
	m.JobFinished("fcm", ClassTransactional, "ACCEPTED")
	m.RetryScheduled("fcm", "PROVIDER_DOWN")
	m.DeadLetter(DeadRetriesExhausted)
	m.UnknownAuthority()
	m.VAPIDSignatures("main", 10)
	m.RedisError(OpRead)
	m.RegistryReload(true, t0)
	m.SetReplicas(3)
	m.SetProviderSource(func() []ProviderGauge {
		return []ProviderGauge{
			{Provider: "fcm", InFlight: 4, InFlightLimit: 64, RatePerSecond: 250, Breaker: BreakerOpen},
			{Provider: "wns", InFlight: 0, InFlightLimit: 16, RatePerSecond: 50, Paused: true},
			{Provider: "fallback", InFlight: 1, InFlightLimit: 8, RatePerSecond: 100, Hosts: &HostGauge{Tracked: 3, Open: 1, Throttled: 2}},
		}
	})
	m.SetQueueStats([]QueueStat{
		{Shard: 0, Stream: StreamIntake, Entries: 10, Lag: 3, OldestPendingAge: 1500 * time.Millisecond, HasPending: true},
		{Shard: 0, Stream: lanePrefix + "fcm", Entries: 7, Lag: 2},
		{Shard: 0, Stream: lanePrefix + "fcm" + bulkLaneSuffix, Entries: 900, Lag: 800, OldestPendingAge: time.Minute, HasPending: true},
		{Shard: 0, Stream: StreamDelayed, Entries: 5},
		{Shard: 1, Stream: StreamDead, Entries: 1},
		{Shard: 1, Stream: StreamResults, Entries: 100},
		{Shard: 1, Stream: StreamGone, Entries: 2},
	}, t0)
}

func TestGatherAndLintNoProblems(t *testing.T) {
	reg, m := newTestMetrics(t)
	populate(m)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestContractNames: a populated registry exports exactly the contract's webpush_ families,
// with their types and label names.
func TestContractNames(t *testing.T) {
	reg, m := newTestMetrics(t)
	populate(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "webpush_") {
			continue
		}
		got[name] = true
		want, ok := contractMetrics[name]
		if !ok {
			t.Errorf("%s is not in the contract", name)
			continue
		}
		if typ := mf.GetType().String(); typ != want.typ {
			t.Errorf("%s: type %s, want %s", name, typ, want.typ)
		}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName())
			}
			if diff := cmp.Diff(want.labels, labels); diff != "" {
				t.Errorf("%s: labels (-want +got):\n%s", name, diff)
				break
			}
		}
	}
	for name := range contractMetrics {
		if !got[name] {
			t.Errorf("%s of the contract is not exported", name)
		}
	}
}

// TestPromtoolCheckMetrics: Prometheus's own linter accepts the scrape text.
func TestPromtoolCheckMetrics(t *testing.T) {
	reg, m := newTestMetrics(t)
	populate(m)
	text, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	metricstest.CheckMetrics(t, text)
}

// TestSeriesExistAtZero: before any event, every provider x class x code series of the sends
// and finished jobs is there at 0 (retries: provider x code, the retryable codes), as are the
// breaker transitions, dead letters, VAPID keys, both histograms (the wait one per provider x
// class, empty) and the build info.
func TestSeriesExistAtZero(t *testing.T) {
	reg, _ := newTestMetrics(t)
	codes := taxonomy.Codes()
	var retryable int
	for _, c := range codes {
		if c.Retryable() {
			retryable++
		}
	}
	if retryable == 0 {
		t.Fatal("taxonomy has no retryable codes")
	}
	p := len(testProviders)
	for name, want := range map[string]int{
		SendsTotal:            p * 2 * len(codes),
		JobsFinishedTotal:     p * 2 * len(codes),
		RetriesScheduledTotal: p * retryable,
		BreakerTransitions:    p * 3,
		DeadLettersTotal:      len(deadReasons),
		VAPIDSignaturesTotal:  len(testKeys),
		UnknownAuthorityTotal: 1,
		BuildInfo:             1,
		SendDurationSeconds:   p,
		SendWaitSeconds:       p * 2,
	} {
		n, err := testutil.GatherAndCount(reg, name)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d series, want %d", name, n, want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	classesOf := map[string]map[string]int{} // metric -> class -> series
	for _, mf := range mfs {
		name := mf.GetName()
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "class" {
					if classesOf[name] == nil {
						classesOf[name] = map[string]int{}
					}
					classesOf[name][l.GetValue()]++
				}
			}
		}
		if name == BuildInfo || !strings.HasPrefix(name, "webpush_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			switch mf.GetType().String() {
			case "COUNTER":
				if v := s.GetCounter().GetValue(); v != 0 {
					t.Errorf("%s %v = %v before any event", name, s.GetLabel(), v)
				}
			case "HISTOGRAM":
				if n := s.GetHistogram().GetSampleCount(); n != 0 {
					t.Errorf("%s %v holds %d observations before any event", name, s.GetLabel(), n)
				}
			}
		}
	}
	// Each class has its own half of the series: a provider x code series of every class.
	for _, name := range []string{SendsTotal, JobsFinishedTotal} {
		want := map[string]int{ClassTransactional: p * len(codes), ClassBulk: p * len(codes)}
		if diff := cmp.Diff(want, classesOf[name]); diff != "" {
			t.Errorf("%s: series by class (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(map[string]int{ClassTransactional: p, ClassBulk: p}, classesOf[SendWaitSeconds]); diff != "" {
		t.Errorf("%s: series by class (-want +got):\n%s", SendWaitSeconds, diff)
	}
	// Nothing a caller's loop writes exists before it writes.
	for _, name := range []string{QueueEntries, QueueStatsRefreshed, Replicas, RegistryReloadSuccess, RegistryReloadTime, InflightRequests} {
		if n, _ := testutil.GatherAndCount(reg, name); n != 0 {
			t.Errorf("%s: %d series before the first write, want none", name, n)
		}
	}
	want := `
# HELP webpush_build_info Always 1; its labels are the worker's version and the Go version it was built with.
# TYPE webpush_build_info gauge
webpush_build_info{goversion="go1.26.8",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), BuildInfo); err != nil {
		t.Error(err)
	}
}

// TestEventValues: a known sequence of calls gives the expected values.
func TestEventValues(t *testing.T) {
	_, m := newTestMetrics(t)
	m.Send("fcm", ClassTransactional, "ACCEPTED", 100*time.Millisecond, "a")
	m.Send("fcm", ClassTransactional, "ACCEPTED", 300*time.Millisecond, "")
	m.Send("fcm", ClassBulk, "ACCEPTED", 300*time.Millisecond, "")
	m.Send("fcm", ClassTransactional, "GONE", 50*time.Millisecond, "b")
	m.Send("wns", ClassBulk, "RATE_LIMITED", time.Second, "")
	m.Send("wns", ClassTransactional, "NOT_A_CODE", time.Second, "")
	m.Send("wns", "urgent", "ACCEPTED", time.Second, "")
	m.BreakerTransition("wns", BreakerOpen.String())
	m.BreakerTransition("wns", BreakerHalfOpen.String())
	m.BreakerTransition("wns", "sideways")
	m.JobFinished("fcm", ClassTransactional, "ACCEPTED")
	m.JobFinished("fcm", ClassTransactional, "ACCEPTED")
	m.JobFinished("fcm", ClassBulk, "EXPIRED")
	m.JobFinished("apple", "", "ACCEPTED")
	m.RetryScheduled("wns", "RATE_LIMITED")
	m.DeadLetter(DeadInvalidJob)
	m.DeadLetter(DeadInvalidJob)
	m.DeadLetter("made_up")
	m.UnknownAuthority()
	m.VAPIDSignatures("main", 5)
	m.VAPIDSignatures("main", 9)
	m.VAPIDSignatures("main", 7) // smaller: ignored
	m.RedisError(OpWrite)
	m.RedisError(OpWrite)

	for _, c := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"sends fcm transactional ACCEPTED", m.sends.WithLabelValues("fcm", ClassTransactional, "ACCEPTED"), 2},
		{"sends fcm bulk ACCEPTED", m.sends.WithLabelValues("fcm", ClassBulk, "ACCEPTED"), 1},
		{"sends fcm transactional GONE", m.sends.WithLabelValues("fcm", ClassTransactional, "GONE"), 1},
		{"sends fcm bulk GONE", m.sends.WithLabelValues("fcm", ClassBulk, "GONE"), 0},
		{"sends wns bulk RATE_LIMITED", m.sends.WithLabelValues("wns", ClassBulk, "RATE_LIMITED"), 1},
		{"sends wns transactional OTHER", m.sends.WithLabelValues("wns", ClassTransactional, OtherCode), 1},
		{"sends wns other-class ACCEPTED", m.sends.WithLabelValues("wns", OtherLabel, "ACCEPTED"), 1},
		{"sends apple transactional ACCEPTED", m.sends.WithLabelValues("apple", ClassTransactional, "ACCEPTED"), 0},
		{"transitions wns open", m.breakerTx.WithLabelValues("wns", "open"), 1},
		{"transitions wns half_open", m.breakerTx.WithLabelValues("wns", "half_open"), 1},
		{"transitions wns other", m.breakerTx.WithLabelValues("wns", OtherLabel), 1},
		{"finished fcm transactional ACCEPTED", m.finished.WithLabelValues("fcm", ClassTransactional, "ACCEPTED"), 2},
		{"finished fcm bulk ACCEPTED", m.finished.WithLabelValues("fcm", ClassBulk, "ACCEPTED"), 0},
		{"finished fcm bulk EXPIRED", m.finished.WithLabelValues("fcm", ClassBulk, "EXPIRED"), 1},
		{"finished apple other-class ACCEPTED", m.finished.WithLabelValues("apple", OtherLabel, "ACCEPTED"), 1},
		{"retries wns RATE_LIMITED", m.retries.WithLabelValues("wns", "RATE_LIMITED"), 1},
		{"dead invalid_job", m.dead.WithLabelValues("invalid_job"), 2},
		{"dead other", m.dead.WithLabelValues("other"), 1},
		{"unknown authority", m.unknown, 1},
		{"signatures main", m.signatures.WithLabelValues("main"), 9},
		{"signatures legacy", m.signatures.WithLabelValues("legacy"), 0},
		{"redis write", m.redisErrs.WithLabelValues("write"), 2},
	} {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSendDurationHistogram: the classic buckets of webpush_send_duration_seconds count the
// observations; a negative duration counts as 0.
func TestSendDurationHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{Providers: []string{"fcm"}})
	if err != nil {
		t.Fatal(err)
	}
	m.Send("fcm", ClassTransactional, "ACCEPTED", 250*time.Millisecond, "a")
	m.Send("fcm", ClassBulk, "ACCEPTED", 500*time.Millisecond, "")
	m.Send("fcm", ClassTransactional, "GONE", 50*time.Millisecond, "b")
	m.Send("fcm", ClassBulk, "GONE", -time.Second, "")

	want := `
# HELP webpush_send_duration_seconds Time from the start of a delivery attempt to its outcome, by provider.
# TYPE webpush_send_duration_seconds histogram
webpush_send_duration_seconds_bucket{provider="fcm",le="0.005"} 1
webpush_send_duration_seconds_bucket{provider="fcm",le="0.01"} 1
webpush_send_duration_seconds_bucket{provider="fcm",le="0.025"} 1
webpush_send_duration_seconds_bucket{provider="fcm",le="0.05"} 2
webpush_send_duration_seconds_bucket{provider="fcm",le="0.1"} 2
webpush_send_duration_seconds_bucket{provider="fcm",le="0.25"} 3
webpush_send_duration_seconds_bucket{provider="fcm",le="0.5"} 4
webpush_send_duration_seconds_bucket{provider="fcm",le="1"} 4
webpush_send_duration_seconds_bucket{provider="fcm",le="2.5"} 4
webpush_send_duration_seconds_bucket{provider="fcm",le="5"} 4
webpush_send_duration_seconds_bucket{provider="fcm",le="10"} 4
webpush_send_duration_seconds_bucket{provider="fcm",le="30"} 4
webpush_send_duration_seconds_bucket{provider="fcm",le="+Inf"} 4
webpush_send_duration_seconds_sum{provider="fcm"} 0.8
webpush_send_duration_seconds_count{provider="fcm"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), SendDurationSeconds); err != nil {
		t.Error(err)
	}

	// The native histogram beside the classic buckets: schema 3 is a growth factor of at most
	// 2^(1/8) ~ 1.09 from one bucket to the next.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mf := range mfs {
		if mf.GetName() != SendDurationSeconds {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		found = true
		if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 || h.GetZeroCount() != 1 {
			t.Errorf("native histogram: schema %d, %d positive spans, zero count %d; want schema 3, spans, zero count 1",
				h.GetSchema(), len(h.GetPositiveSpan()), h.GetZeroCount())
		}
		if len(h.GetExemplars()) != 2 {
			t.Errorf("native histogram holds %d exemplars, want 2 (the sends with a job id)", len(h.GetExemplars()))
		}
	}
	if !found {
		t.Fatal("no webpush_send_duration_seconds gathered")
	}
}

// TestSendWaitHistogram: webpush_send_wait_seconds keeps each class's waits apart (a class
// outside the two counts as other), its classic buckets reach an hour with a minute among them,
// a negative wait counts as 0, and a native histogram stands beside them.
func TestSendWaitHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{Providers: []string{"fcm"}})
	if err != nil {
		t.Fatal(err)
	}
	m.SendWait("fcm", ClassTransactional, 250*time.Millisecond)
	m.SendWait("fcm", ClassTransactional, 500*time.Millisecond)
	m.SendWait("fcm", ClassTransactional, -time.Second)
	m.SendWait("fcm", ClassBulk, 45*time.Second)
	m.SendWait("fcm", ClassBulk, 90*time.Second)
	m.SendWait("fcm", ClassBulk, 2*time.Hour)
	m.SendWait("fcm", "urgent", time.Second)

	want := `
# HELP webpush_send_wait_seconds Time from when a job became due to the start of its send request, by provider and class: a first attempt counts from the job's enqueued_at (its send_at when that is later), a retry from its write back to the lane (the time in the lane entry's id, by Redis's clock).
# TYPE webpush_send_wait_seconds histogram
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.005"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.01"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.025"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.05"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.1"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.25"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="0.5"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="1"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="2.5"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="5"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="10"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="30"} 0
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="60"} 1
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="120"} 2
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="300"} 2
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="600"} 2
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="1800"} 2
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="3600"} 2
webpush_send_wait_seconds_bucket{class="bulk",provider="fcm",le="+Inf"} 3
webpush_send_wait_seconds_sum{class="bulk",provider="fcm"} 7335
webpush_send_wait_seconds_count{class="bulk",provider="fcm"} 3
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.005"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.01"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.025"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.05"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.1"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.25"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="0.5"} 0
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="1"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="2.5"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="5"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="10"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="30"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="60"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="120"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="300"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="600"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="1800"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="3600"} 1
webpush_send_wait_seconds_bucket{class="other",provider="fcm",le="+Inf"} 1
webpush_send_wait_seconds_sum{class="other",provider="fcm"} 1
webpush_send_wait_seconds_count{class="other",provider="fcm"} 1
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.005"} 1
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.01"} 1
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.025"} 1
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.05"} 1
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.1"} 1
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.25"} 2
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="0.5"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="1"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="2.5"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="5"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="10"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="30"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="60"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="120"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="300"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="600"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="1800"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="3600"} 3
webpush_send_wait_seconds_bucket{class="transactional",provider="fcm",le="+Inf"} 3
webpush_send_wait_seconds_sum{class="transactional",provider="fcm"} 0.75
webpush_send_wait_seconds_count{class="transactional",provider="fcm"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), SendWaitSeconds); err != nil {
		t.Error(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	zeros := map[string]uint64{} // class -> observations in the native histogram's zero bucket
	for _, mf := range mfs {
		if mf.GetName() != SendWaitSeconds {
			continue
		}
		for _, s := range mf.GetMetric() {
			h := s.GetHistogram()
			if h.GetSchema() != 3 || len(h.GetPositiveSpan()) == 0 {
				t.Errorf("%v: native histogram schema %d with %d positive spans; want schema 3 and spans", s.GetLabel(), h.GetSchema(), len(h.GetPositiveSpan()))
			}
			for _, l := range s.GetLabel() {
				if l.GetName() == "class" {
					zeros[l.GetValue()] = h.GetZeroCount()
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]uint64{ClassTransactional: 1, ClassBulk: 0, OtherLabel: 0}, zeros); diff != "" {
		t.Errorf("zero-bucket observations of the native histograms by class (-want +got):\n%s", diff)
	}
}

// TestRegistryReload: success is 1 then 0 after a failure; the timestamp keeps the last
// success.
func TestRegistryReload(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.RegistryReload(true, t0)
	m.RegistryReload(false, t0.Add(time.Minute))
	want := fmt.Sprintf(`
# HELP webpush_registry_reload_success 1 if the last load of the registry succeeded, else 0.
# TYPE webpush_registry_reload_success gauge
webpush_registry_reload_success 0
# HELP webpush_registry_reload_timestamp_seconds When the registry was last loaded successfully, in Unix seconds.
# TYPE webpush_registry_reload_timestamp_seconds gauge
webpush_registry_reload_timestamp_seconds %d
`, t0.Unix())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), RegistryReloadSuccess, RegistryReloadTime); err != nil {
		t.Error(err)
	}
	m.RegistryReload(true, t0.Add(2*time.Minute))
	want = fmt.Sprintf(`
# HELP webpush_registry_reload_success 1 if the last load of the registry succeeded, else 0.
# TYPE webpush_registry_reload_success gauge
webpush_registry_reload_success 1
# HELP webpush_registry_reload_timestamp_seconds When the registry was last loaded successfully, in Unix seconds.
# TYPE webpush_registry_reload_timestamp_seconds gauge
webpush_registry_reload_timestamp_seconds %d
`, t0.Add(2*time.Minute).Unix())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), RegistryReloadSuccess, RegistryReloadTime); err != nil {
		t.Error(err)
	}
}

// TestSetProvidersAddsSeries: a provider added by a reload has its series at 0 at once; the
// series of a removed one stay.
func TestSetProvidersAddsSeries(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetProviders([]string{"fcm", "newpush"})
	codes := len(taxonomy.Codes())
	for name, want := range map[string]int{
		SendsTotal:          (len(testProviders) + 1) * 2 * codes,
		JobsFinishedTotal:   (len(testProviders) + 1) * 2 * codes,
		BreakerTransitions:  (len(testProviders) + 1) * 3,
		SendDurationSeconds: len(testProviders) + 1,
		SendWaitSeconds:     (len(testProviders) + 1) * 2,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	for _, class := range classes {
		if v := testutil.ToFloat64(m.sends.WithLabelValues("newpush", class, "ACCEPTED")); v != 0 {
			t.Errorf("newpush %s ACCEPTED = %v, want 0", class, v)
		}
	}
}

// TestNilMetrics: every method of a nil *Metrics returns without recording or panicking.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	populate(m)
	m.SetProviders(testProviders)
	m.SetProviderSource(nil)
	m.SetQueueStats(nil, time.Time{})
}

// TestHostGaugesOnlyWhereHostsAreLimited: the host gauges are exported for the providers
// whose source gives host counts (a fallback entry's), and for no other.
func TestHostGaugesOnlyWhereHostsAreLimited(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetProviderSource(func() []ProviderGauge {
		return []ProviderGauge{
			{Provider: "fcm", InFlightLimit: 8, RatePerSecond: 10},
			{Provider: "fallback", InFlightLimit: 8, RatePerSecond: 10, Hosts: &HostGauge{Tracked: 3, Open: 1, Throttled: 2}},
		}
	})
	want := `
# HELP webpush_hosts_open Hosts of the provider whose own breaker is open or half-open in this replica.
# TYPE webpush_hosts_open gauge
webpush_hosts_open{provider="fallback"} 1
# HELP webpush_hosts_throttled Hosts of the provider held to a rate or a Retry-After pause of their own in this replica.
# TYPE webpush_hosts_throttled gauge
webpush_hosts_throttled{provider="fallback"} 2
# HELP webpush_hosts_tracked Hosts of the provider with limits of their own in this replica (a breaker's failures or a throttle).
# TYPE webpush_hosts_tracked gauge
webpush_hosts_tracked{provider="fallback"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), HostsTracked, HostsOpen, HostsThrottled); err != nil {
		t.Error(err)
	}
}

// TestProviderSourceReadAtScrape: the per-provider gauges are what the source returns at each
// scrape, not at SetProviderSource.
func TestProviderSourceReadAtScrape(t *testing.T) {
	reg, m := newTestMetrics(t)
	inflight := 1
	calls := 0
	m.SetProviderSource(func() []ProviderGauge {
		calls++
		return []ProviderGauge{{Provider: "fcm", InFlight: inflight, InFlightLimit: 8, RatePerSecond: 12.5, Breaker: BreakerHalfOpen, Paused: true}}
	})
	if calls != 0 {
		t.Fatalf("the source ran %d times before any scrape", calls)
	}
	want := func(n int) string {
		return fmt.Sprintf(`
# HELP webpush_breaker_state The provider breaker's state in this replica: 0 closed, 1 half-open, 2 open.
# TYPE webpush_breaker_state gauge
webpush_breaker_state{provider="fcm"} 1
# HELP webpush_inflight_limit In-flight requests this replica may have open to the provider.
# TYPE webpush_inflight_limit gauge
webpush_inflight_limit{provider="fcm"} 8
# HELP webpush_inflight_requests Requests to the provider in flight in this replica.
# TYPE webpush_inflight_requests gauge
webpush_inflight_requests{provider="fcm"} %d
# HELP webpush_provider_paused 1 while the provider is paused by an operator, else 0.
# TYPE webpush_provider_paused gauge
webpush_provider_paused{provider="fcm"} 1
# HELP webpush_rate_limit_per_second Requests per second this replica may send to the provider.
# TYPE webpush_rate_limit_per_second gauge
webpush_rate_limit_per_second{provider="fcm"} 12.5
`, n)
	}
	names := []string{InflightRequests, InflightLimit, RateLimitPerSecond, BreakerStateMetric, ProviderPaused}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want(1)), names...); err != nil {
		t.Error(err)
	}
	inflight = 5
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want(5)), names...); err != nil {
		t.Error(err)
	}
	if calls < 2 {
		t.Errorf("the source ran %d times for two scrapes", calls)
	}
	m.SetProviderSource(nil)
	if n, _ := testutil.GatherAndCount(reg, InflightRequests); n != 0 {
		t.Errorf("%d inflight series after SetProviderSource(nil)", n)
	}
}

// TestQueueStatsReplace: each SetQueueStats replaces the whole set; lag only for the intake and
// lanes; the oldest pending age for the intake and lanes always (0 with nothing pending) and
// elsewhere only where there is one; lanes as stream="lane:<id>" with class="transactional",
// bulk lanes as stream="lane:<id>:bulk" with class="bulk", every other stream with the class
// empty (a provider named "bulk" has a transactional lane like any other).
func TestQueueStatsReplace(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetQueueStats([]QueueStat{
		{Shard: 0, Stream: StreamIntake, Entries: 10, Lag: 4, OldestPendingAge: 2 * time.Second, HasPending: true},
		{Shard: 0, Stream: lanePrefix + "fcm", Entries: 6, Lag: 1},
		{Shard: 0, Stream: lanePrefix + "fcm" + bulkLaneSuffix, Entries: 800, Lag: 700, OldestPendingAge: 90 * time.Second, HasPending: true},
		{Shard: 0, Stream: lanePrefix + "bulk", Entries: 2, Lag: 2},
		{Shard: 1, Stream: StreamDelayed, Entries: 3, Lag: 99, HasPending: true, OldestPendingAge: time.Second},
	}, t0)
	names := []string{QueueEntries, QueueLagEntries, OldestPendingAge, QueueStatsRefreshed}
	want := fmt.Sprintf(`
# HELP webpush_oldest_pending_age_seconds Age of the stream's oldest entry read but not acknowledged. The same on every replica: aggregate with max.
# TYPE webpush_oldest_pending_age_seconds gauge
webpush_oldest_pending_age_seconds{class="",shard="0",stream="intake"} 2
webpush_oldest_pending_age_seconds{class="",shard="1",stream="delayed"} 1
webpush_oldest_pending_age_seconds{class="bulk",shard="0",stream="lane:fcm:bulk"} 90
webpush_oldest_pending_age_seconds{class="transactional",shard="0",stream="lane:bulk"} 0
webpush_oldest_pending_age_seconds{class="transactional",shard="0",stream="lane:fcm"} 0
# HELP webpush_queue_entries Entries in the stream (members of the delayed set). The same on every replica: aggregate with max.
# TYPE webpush_queue_entries gauge
webpush_queue_entries{class="",shard="0",stream="intake"} 10
webpush_queue_entries{class="",shard="1",stream="delayed"} 3
webpush_queue_entries{class="bulk",shard="0",stream="lane:fcm:bulk"} 800
webpush_queue_entries{class="transactional",shard="0",stream="lane:bulk"} 2
webpush_queue_entries{class="transactional",shard="0",stream="lane:fcm"} 6
# HELP webpush_queue_lag_entries Entries of the intake or a lane the consumer group has not read yet. The same on every replica: aggregate with max.
# TYPE webpush_queue_lag_entries gauge
webpush_queue_lag_entries{class="",shard="0",stream="intake"} 4
webpush_queue_lag_entries{class="bulk",shard="0",stream="lane:fcm:bulk"} 700
webpush_queue_lag_entries{class="transactional",shard="0",stream="lane:bulk"} 2
webpush_queue_lag_entries{class="transactional",shard="0",stream="lane:fcm"} 1
# HELP webpush_queue_stats_refreshed_timestamp_seconds When this replica last read the queue statistics, in Unix seconds.
# TYPE webpush_queue_stats_refreshed_timestamp_seconds gauge
webpush_queue_stats_refreshed_timestamp_seconds %d
`, t0.Unix())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The lanes and the delayed set are gone; an unknown stream and a repeated one are left out.
	m.SetQueueStats([]QueueStat{
		{Shard: 0, Stream: StreamIntake, Entries: 2, Lag: 0},
		{Shard: 0, Stream: StreamIntake, Entries: 9, Lag: 9},
		{Shard: 0, Stream: "https://fcm.googleapis.com/fcm/send/abc"},
		{Shard: 0, Stream: "lane:"},
	}, t0.Add(time.Minute))
	want = fmt.Sprintf(`
# HELP webpush_oldest_pending_age_seconds Age of the stream's oldest entry read but not acknowledged. The same on every replica: aggregate with max.
# TYPE webpush_oldest_pending_age_seconds gauge
webpush_oldest_pending_age_seconds{class="",shard="0",stream="intake"} 0
# HELP webpush_queue_entries Entries in the stream (members of the delayed set). The same on every replica: aggregate with max.
# TYPE webpush_queue_entries gauge
webpush_queue_entries{class="",shard="0",stream="intake"} 2
# HELP webpush_queue_lag_entries Entries of the intake or a lane the consumer group has not read yet. The same on every replica: aggregate with max.
# TYPE webpush_queue_lag_entries gauge
webpush_queue_lag_entries{class="",shard="0",stream="intake"} 0
# HELP webpush_queue_stats_refreshed_timestamp_seconds When this replica last read the queue statistics, in Unix seconds.
# TYPE webpush_queue_stats_refreshed_timestamp_seconds gauge
webpush_queue_stats_refreshed_timestamp_seconds %d
`, t0.Add(time.Minute).Unix())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// TestReplicas: webpush_replicas is the last count.
func TestReplicas(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetReplicas(2)
	m.SetReplicas(4)
	want := `
# HELP webpush_replicas Live replicas of the worker, as the heartbeat counts them. The same on every replica: aggregate with max.
# TYPE webpush_replicas gauge
webpush_replicas 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), Replicas); err != nil {
		t.Error(err)
	}
}

// TestLabelSetsAreBounded: a caller passing ever new VAPID keys stops adding series at
// MaxLabelValues, and a Redis operation outside the fixed set adds none; the rest count as
// other, and the first of each is logged.
func TestLabelSetsAreBounded(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{Keys: []string{"main"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		m.RedisError(RedisOp(fmt.Sprintf("op%d", i)))
		m.VAPIDSignatures(fmt.Sprintf("key%d", i), uint64(i+1))
	}
	m.RedisError(OpProbe)
	if n, _ := testutil.GatherAndCount(reg, RedisErrorsTotal); n != len(redisOps) {
		t.Errorf("%d redis error series, want the %d operations", n, len(redisOps))
	}
	if n, _ := testutil.GatherAndCount(reg, VAPIDSignaturesTotal); n != MaxLabelValues+1 {
		t.Errorf("%d signature series, want %d", n, MaxLabelValues+1)
	}
	if got := testutil.ToFloat64(m.redisErrs.WithLabelValues(string(OpOther))); got != 100 {
		t.Errorf("redis errors counted as other = %v, want 100", got)
	}
	if got := testutil.ToFloat64(m.redisErrs.WithLabelValues(string(OpProbe))); got != 1 {
		t.Errorf("probe errors = %v, want 1", got)
	}
	// Keys key31..key99 overflow (main takes one place): the other series follows their largest total.
	if got := testutil.ToFloat64(m.signatures.WithLabelValues(OtherLabel)); got != 100 {
		t.Errorf("signatures counted as other = %v, want 100", got)
	}
	out := logs.String()
	for _, want := range []string{"metric=" + RedisErrorsTotal, "value=op0", "metric=" + VAPIDSignaturesTotal, "value=key31"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("%d log lines, want one per label:\n%s", n, out)
	}
}

// TestExemplarValueFits: a job id too long for an exemplar is cut, never a panic.
func TestExemplarValueFits(t *testing.T) {
	_, m := newTestMetrics(t)
	long := strings.Repeat("é", 500)
	m.Send("fcm", ClassTransactional, "ACCEPTED", time.Millisecond, long)
	m.Send("fcm", ClassTransactional, "ACCEPTED", time.Millisecond, "\xff\xfe")
	got := exemplarValue(long)
	if n := len([]rune(got)) + len(exemplarJobIDLabel); n != prometheus.ExemplarMaxRunes {
		t.Errorf("cut exemplar has %d runes with its label name, want %d", n, prometheus.ExemplarMaxRunes)
	}
	if got := exemplarValue("job-1"); got != "job-1" {
		t.Errorf("exemplarValue(job-1) = %q", got)
	}
}

// TestNewMetricsTwiceFails: registering a second Metrics on one registry is an error.
func TestNewMetricsTwiceFails(t *testing.T) {
	reg, _ := newTestMetrics(t)
	if _, err := NewMetrics(reg, MetricsOptions{}); err == nil {
		t.Fatal("a second NewMetrics on one registry succeeded")
	}
	if _, err := NewMetrics(nil, MetricsOptions{}); err == nil {
		t.Fatal("NewMetrics(nil) succeeded")
	}
}

// TestBreakerStateString: the to label values and webpush_breaker_state values agree.
func TestBreakerStateString(t *testing.T) {
	got := map[string]int{}
	for _, s := range []BreakerState{BreakerClosed, BreakerHalfOpen, BreakerOpen, BreakerState(7)} {
		got[s.String()] = int(s)
	}
	want := map[string]int{"closed": 0, "half_open": 1, "open": 2, "other": 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	names := append([]string(nil), breakerStates...)
	sort.Strings(names)
	if diff := cmp.Diff([]string{"closed", "half_open", "open"}, names); diff != "" {
		t.Errorf("breaker states (-want +got):\n%s", diff)
	}
}

// TestQueueStreamsHaveLagAndClass: both intakes and every lane export their lag, the streams
// that more replicas can work off; an intake's class label is empty (it holds whatever class
// its jobs name), a lane's is its class.
func TestQueueStreamsHaveLagAndClass(t *testing.T) {
	for _, c := range []struct {
		stream string
		lag    bool
		class  string
	}{
		{StreamIntake, true, ""},
		{StreamBulkIntake, true, ""},
		{lanePrefix + "fcm", true, ClassTransactional},
		{lanePrefix + "fcm" + bulkLaneSuffix, true, ClassBulk},
		{StreamDelayed, false, ""},
		{StreamResults, false, ""},
	} {
		if !knownStream(c.stream) || hasLag(c.stream) != c.lag || streamClass(c.stream) != c.class {
			t.Errorf("%s: known %v, lag %v, class %q; want known, lag %v, class %q",
				c.stream, knownStream(c.stream), hasLag(c.stream), streamClass(c.stream), c.lag, c.class)
		}
	}
}
