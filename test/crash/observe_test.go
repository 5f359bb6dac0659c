package crash_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// observeRegistry is the crash tests' registry with an autopush breaker that opens after five
// failures and stays open for the rest of the test.
var observeRegistry = strings.Replace(testRegistry, "    hosts: [push.services.mozilla.com]\n",
	"    hosts: [push.services.mozilla.com]\n    breaker: {failure_ratio: 0.5, window: 1m, min_samples: 5, cooldown: 10m}\n", 1)

// scrape is one read of /metrics.
type scrape struct {
	metricstest.Families
	t    *testing.T
	text []byte
}

func (c *cluster) scrape(addr string) scrape {
	c.t.Helper()
	status, body := httpGet(c.t, "http://"+addr+"/metrics", "")
	if status != http.StatusOK {
		c.t.Fatalf("GET /metrics: %d\n%s", status, body)
	}
	return scrape{Families: metricstest.Parse(c.t, body), t: c.t, text: body}
}

// value is the value of the series of name with these labels; the test fails when there is
// none.
func (s scrape) value(name string, labels ...string) float64 {
	s.t.Helper()
	return s.Value(s.t, name, labels...)
}

func httpGet(t *testing.T, url, accept string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// httpAddr is the address worker i's listener took (it logs it, having been given port 0).
func (c *cluster) httpAddr(i int) string {
	c.t.Helper()
	c.mu.Lock()
	w := c.workers[i]
	c.mu.Unlock()
	return w.HTTPAddr(c.t, 30*time.Second)
}

// jobsTo makes n jobs to fresh subscriptions of provider (host for the generic one).
func (c *cluster) jobsTo(provider, host, prefix string, n int) ([][]byte, []string) {
	c.t.Helper()
	lines := make([][]byte, n)
	ids := make([]string, n)
	for i := range n {
		sub, err := c.sim.Subscribe(provider, host, c.subscribeKey)
		if err != nil {
			c.t.Fatal(err)
		}
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		lines[i] = mustJSON(c.t, map[string]any{"id": ids[i], "subscription": sub, "payload": "m " + ids[i], "ttl": 3600})
	}
	return lines, ids
}

// ledger counts the terminal records by provider and code.
func (c *cluster) ledger() map[[2]string]int {
	c.t.Helper()
	n := map[[2]string]int{}
	if err := c.store.Results(context.Background(), func(r stream.Result) { n[[2]string{r.Provider, r.Code}]++ }); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// eventually polls cond every 100 ms for up to d; cond returns why it is not there yet.
func eventually(t *testing.T, d time.Duration, cond func() string) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("after %s: %s", d, why)
		}
		time.Sleep(100 * time.Millisecond) // polling a state over HTTP or Redis
	}
}

// TestWorkerServesMetricsAndHealth runs the real binary with its listener on a free port,
// drives jobs through pushsim to every kind of outcome, and checks the scrape against the
// ledger; then kills Redis and sees readiness, and only readiness, fail and come back.
func TestWorkerServesMetricsAndHealth(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t, clusterOptions{registry: observeRegistry, args: []string{
		"--stats-every", "200ms", "--redis-check-fresh", "3s", "--retry-base", "10m",
	}})
	if err := c.sim.SetFault(pushsim.Autopush, pushsim.Fault{Kind: pushsim.Fail}); err != nil {
		t.Fatal(err)
	}
	if err := c.sim.SetFault(pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 410}); err != nil {
		t.Fatal(err)
	}
	c.startWorker()
	addr := c.httpAddr(0)
	c.waitRunning()

	before := c.scrape(addr)
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "fallback"} {
		for _, code := range []taxonomy.Code{taxonomy.Accepted, taxonomy.Gone, taxonomy.RateLimited, taxonomy.ProviderDown} {
			for _, class := range []string{"transactional", "bulk"} {
				if v := before.value("webpush_sends_total", "provider", p, "class", class, "code", string(code)); v != 0 {
					t.Errorf("before any job: webpush_sends_total{%s,%s,%s} = %v, want 0", p, class, code, v)
				}
			}
		}
		if v := before.value("webpush_breaker_state", "provider", p); v != 0 {
			t.Errorf("before any job: breaker of %s reads %v, want 0", p, v)
		}
	}
	metricstest.CheckMetrics(t, before.text)

	var all [][]byte
	for _, g := range []struct {
		provider, host, prefix string
		n                      int
	}{
		{pushsim.FCM, "", "fcm", 40}, {pushsim.Autopush, "", "moz", 12}, {pushsim.Apple, "", "apple", 10},
		{pushsim.Generic, genericHost, "self", 5},
	} {
		lines, _ := c.jobsTo(g.provider, g.host, g.prefix, g.n)
		all = append(all, lines...)
	}
	if _, err := c.producer.Enqueue(context.Background(), all...); err != nil {
		t.Fatal(err)
	}

	// 40 + 10 + 5 terminal records. Autopush fails: the sends that went out before its
	// breaker opened (at least its 5 samples) wait to retry 10 minutes away; the breaker holds
	// the rest unsent and unspent, put back on the delayed set or left in the lane.
	eventually(t, 30*time.Second, func() string {
		l := c.ledger()
		if l[[2]string{"fcm", "ACCEPTED"}] != 40 || l[[2]string{"apple", "GONE"}] != 10 || l[[2]string{"fallback", "ACCEPTED"}] != 5 {
			return fmt.Sprintf("ledger %v", l)
		}
		s := c.scrape(addr)
		delayed := s.value("webpush_queue_entries", "shard", "0", "stream", "delayed")
		lane := s.value("webpush_queue_entries", "shard", "0", "stream", "lane:autopush")
		if delayed < 5 || delayed+lane != 12 {
			return fmt.Sprintf("autopush: %v delayed + %v in its lane, want at least 5 delayed and 12 in all", delayed, lane)
		}
		// The queue statistics are refreshed every --stats-every: wait for a refresh that
		// counts the records the ledger already holds.
		if results := s.value("webpush_queue_entries", "shard", "0", "stream", "results"); results != 55 {
			return fmt.Sprintf("the statistics count %v results, the ledger 55", results)
		}
		return ""
	})
	s := c.scrape(addr)
	l := c.ledger()
	for _, want := range []struct {
		provider, code string
		n              int
	}{{"fcm", "ACCEPTED", 40}, {"apple", "GONE", 10}, {"fallback", "ACCEPTED", 5}} {
		// Every job here is transactional.
		if got := s.value("webpush_sends_total", "provider", want.provider, "class", "transactional", "code", want.code); got != float64(l[[2]string{want.provider, want.code}]) {
			t.Errorf("webpush_sends_total{%s,transactional,%s} = %v; the ledger holds %d", want.provider, want.code, got, l[[2]string{want.provider, want.code}])
		}
		if got := s.value("webpush_jobs_finished_total", "provider", want.provider, "class", "transactional", "code", want.code); got != float64(want.n) {
			t.Errorf("webpush_jobs_finished_total{%s,transactional,%s} = %v, want %d", want.provider, want.code, got, want.n)
		}
		if got := s.value("webpush_send_wait_seconds", "provider", want.provider, "class", "transactional"); got != float64(want.n) {
			t.Errorf("webpush_send_wait_seconds{%s,transactional} counts %v sends, want %d", want.provider, got, want.n)
		}
	}
	// Each failed send schedules one retry; an entry read when the breaker had just opened is
	// put back on the delayed set unsent, which is no retry (its attempt is not spent).
	delayed := s.value("webpush_queue_entries", "shard", "0", "stream", "delayed")
	down := s.value("webpush_sends_total", "provider", "autopush", "class", "transactional", "code", "PROVIDER_DOWN")
	if down < 5 || down > delayed {
		t.Errorf("webpush_sends_total{autopush,PROVIDER_DOWN} = %v, want at least the breaker's 5 samples and at most the %v delayed", down, delayed)
	}
	if got := s.value("webpush_retries_scheduled_total", "provider", "autopush", "code", "PROVIDER_DOWN"); got != down {
		t.Errorf("webpush_retries_scheduled_total{autopush,PROVIDER_DOWN} = %v, want one per failed send (%v)", got, down)
	}
	if got := s.value("webpush_sends_total", "provider", "autopush", "class", "transactional", "code", "CIRCUIT_OPEN"); got != 0 {
		t.Errorf("webpush_sends_total{autopush,CIRCUIT_OPEN} = %v: an open breaker holds the lane, it spends no attempt", got)
	}
	for _, want := range []struct {
		why    string
		value  float64
		name   string
		labels []string
	}{
		{"autopush's breaker is open", 2, "webpush_breaker_state", []string{"provider", "autopush"}},
		{"it opened once", 1, "webpush_breaker_transitions_total", []string{"provider", "autopush", "to", "open"}},
		{"fcm's breaker is closed", 0, "webpush_breaker_state", []string{"provider", "fcm"}},
		{"every fcm send was timed", 40, "webpush_send_duration_seconds", []string{"provider", "fcm"}},
		{"the 5 self-hosted jobs", 5, "webpush_unknown_authority_total", nil},
		{"the registry's rate (one replica)", 10000, "webpush_rate_limit_per_second", []string{"provider", "fcm"}},
		{"the registry's max_in_flight", 8, "webpush_inflight_limit", []string{"provider", "fcm"}},
		{"nothing in flight after the run", 0, "webpush_inflight_requests", []string{"provider", "fcm"}},
		{"one replica", 1, "webpush_replicas", nil},
		{"55 terminal records", 55, "webpush_queue_entries", []string{"shard", "0", "stream", "results"}},
		{"10 gone endpoints", 10, "webpush_queue_entries", []string{"shard", "0", "stream", "gone"}},
		{"the intake read whole", 0, "webpush_queue_lag_entries", []string{"shard", "0", "stream", "intake"}},
	} {
		if got := s.value(want.name, want.labels...); got != want.value {
			t.Errorf("%s%v = %v, want %v: %s", want.name, want.labels, got, want.value, want.why)
		}
	}
	if got := s.value("webpush_vapid_signatures_total", "key", "default"); got < 1 {
		t.Errorf("webpush_vapid_signatures_total{default} = %v, want at least 1", got)
	}
	if at := s.value("webpush_queue_stats_refreshed_timestamp_seconds"); time.Since(time.Unix(int64(at), 0)) > 10*time.Second {
		t.Errorf("queue statistics refreshed at %v, more than 10 s ago", at)
	}
	if got := s.value("webpush_registry_reload_success"); got != 1 {
		t.Errorf("webpush_registry_reload_success = %v, want 1", got)
	}
	build := s.Families["webpush_build_info"]
	if build == nil || len(build.GetMetric()) != 1 || build.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("webpush_build_info: %v, want one series at 1", build)
	}
	metricstest.CheckMetrics(t, s.text)

	// OpenMetrics, with the job id as the exemplar of a send's duration.
	status, om := httpGet(t, "http://"+addr+"/metrics", "application/openmetrics-text; version=1.0.0")
	if status != http.StatusOK || !bytes.HasSuffix(om, []byte("# EOF\n")) || !bytes.Contains(om, []byte(`# {job_id="fcm-`)) {
		t.Errorf("OpenMetrics scrape: status %d, %d bytes, want an exemplar with a job_id and # EOF", status, len(om))
	}

	health := func(path string) (int, string) {
		st, body := httpGet(t, "http://"+addr+path, "")
		return st, string(body)
	}
	if st, body := health("/livez"); st != http.StatusOK {
		t.Fatalf("/livez = %d %s", st, body)
	}
	if st, body := health("/readyz?verbose"); st != http.StatusOK || !strings.Contains(body, "redis") || !strings.Contains(body, "registry") || !strings.Contains(body, "groups") {
		t.Fatalf("/readyz?verbose = %d %q, want 200 listing the redis, registry and groups checks", st, body)
	}

	c.redis.Kill()
	eventually(t, 20*time.Second, func() string {
		if st, body := health("/livez"); st != http.StatusOK {
			t.Fatalf("/livez = %d %s while Redis is down: a Redis outage must not restart the pod", st, body)
		}
		if st, body := health("/readyz"); st != http.StatusServiceUnavailable || !strings.Contains(body, "redis") {
			return fmt.Sprintf("/readyz = %d %q, want 503 naming redis", st, body)
		}
		return ""
	})
	c.redis.Restart()
	eventually(t, 30*time.Second, func() string {
		if st, body := health("/livez"); st != http.StatusOK {
			t.Fatalf("/livez = %d %s", st, body)
		}
		if st, body := health("/readyz"); st != http.StatusOK {
			return fmt.Sprintf("/readyz = %d %q after Redis came back", st, body)
		}
		return ""
	})
	c.waitLog(`"msg":"dispatch: redis is reachable again"`, 1)
	after := c.scrape(addr)
	var redisErrors float64
	for _, op := range []string{"read", "write", "check", "heartbeat", "probe", "reclaim", "stats", "setup", "promote", "janitor", "other"} {
		redisErrors += after.value("webpush_redis_errors_total", "op", op)
	}
	if redisErrors < 1 {
		t.Errorf("webpush_redis_errors_total sums to %v after an outage, want at least 1", redisErrors)
	}
}

// TestRegistryReloads edits the registry file under a running worker: the rate gauge follows
// a changed rate, a broken file keeps the running table and sets the success gauge to 0, and
// with the file watch off SIGHUP alone reloads.
func TestRegistryReloads(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "file watch", false: "SIGHUP"}[watch], func(t *testing.T) {
			every := "100ms"
			if !watch {
				every = "0"
			}
			c := newCluster(t, clusterOptions{args: []string{"--registry-check-every", every}})
			c.startWorker()
			addr := c.httpAddr(0)
			c.waitRunning()
			edit := func(content string) {
				t.Helper()
				tmp := c.regFile + ".tmp"
				if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, c.regFile); err != nil {
					t.Fatal(err)
				}
				if !watch {
					c.mu.Lock()
					w := c.workers[0]
					c.mu.Unlock()
					if err := w.Signal(syscall.SIGHUP); err != nil {
						t.Fatal(err)
					}
				}
			}
			rate := func() float64 { return c.scrape(addr).value("webpush_rate_limit_per_second", "provider", "fcm") }
			if got := rate(); got != 10000 {
				t.Fatalf("rate gauge %v at start, want 10000", got)
			}

			edit(strings.Replace(testRegistry, "rate: 10000", "rate: 2500", 1))
			eventually(t, 10*time.Second, func() string {
				if got := rate(); got != 2500 {
					return fmt.Sprintf("webpush_rate_limit_per_second{fcm} = %v, want 2500 after the edit", got)
				}
				return ""
			})
			s := c.scrape(addr)
			if got := s.value("webpush_registry_reload_success"); got != 1 {
				t.Errorf("success gauge %v after a good reload", got)
			}
			goodAt := s.value("webpush_registry_reload_timestamp_seconds")

			broken := strings.Replace(testRegistry, "rate: 10000", "rate: 0", 1)
			broken = strings.Replace(broken, "max_in_flight: 8", "max_in_flight: many", 1)
			edit(broken)
			eventually(t, 10*time.Second, func() string {
				if got := c.scrape(addr).value("webpush_registry_reload_success"); got != 0 {
					return fmt.Sprintf("webpush_registry_reload_success = %v after a broken edit, want 0", got)
				}
				return ""
			})
			s = c.scrape(addr)
			if got := s.value("webpush_rate_limit_per_second", "provider", "fcm"); got != 2500 {
				t.Errorf("rate gauge %v after a broken edit, want the running table's 2500", got)
			}
			if got := s.value("webpush_registry_reload_timestamp_seconds"); got != goodAt {
				t.Errorf("last successful load moved from %v to %v on a failed one", goodAt, got)
			}
			// Every problem is logged with the file and line.
			c.waitLog(filepath.Base(c.regFile)+`:4: defaults.max_in_flight`, 1)
			c.waitLog(filepath.Base(c.regFile)+`:5: defaults.rate`, 1)
			if st, body := httpGet(t, "http://"+addr+"/readyz", ""); st != http.StatusOK {
				t.Errorf("/readyz = %d %s after a refused reload: the running table is still good", st, body)
			}

			// A removed provider is refused, with how to drain it.
			edit(strings.Replace(testRegistry, "  - id: wns\n    hosts: [notify.windows.com]\n", "", 1))
			c.waitLog(`Orphan lanes`, 1)
			if got := c.scrape(addr).value("webpush_rate_limit_per_second", "provider", "wns"); got != 2500 {
				t.Errorf("wns rate gauge %v after its removal was refused, want the running table's 2500", got)
			}
		})
	}
}

// TestSIGHUPDuringDrainIsIgnored: a SIGHUP that arrives while the worker drains its sends
// after SIGTERM neither ends the process (its default action) nor cuts the sends: the worker
// exits 0 with every job sent once and recorded once.
func TestSIGHUPDuringDrainIsIgnored(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t, clusterOptions{args: []string{"--grace", "10s"}})
	if err := c.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c.startWorker()
	c.waitRunning()
	lines, ids := c.fcmJobs("hup", 5)
	if _, err := c.producer.Enqueue(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	c.waitInFlight(5)
	c.mu.Lock()
	w := c.workers[0]
	c.workers = nil // this test waits for it
	c.mu.Unlock()
	if err := w.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitLog(`"msg":"dispatch: stopping`, 1)
	for range 3 {
		if err := w.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("worker exit after SIGTERM and SIGHUP: %v", err)
	}
	c.waitLog(`"msg":"SIGHUP ignored: the worker is shutting down"`, 1)
	c.requireOnePushEach(ids)
	if rep := c.waitQuiet(ids, 10*time.Second); rep.ExactlyOne != len(ids) {
		t.Errorf("records: %s", summarize(rep))
	}
}
