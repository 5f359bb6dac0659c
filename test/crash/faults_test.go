package crash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// These tests fault Redis, not the workers: nothing crashes but Redis, so no job may reach
// pushsim twice. Each counts the requests pushsim got per job id (every answer, not only the
// accepted ones) and ends with `gateway-worker audit` reporting exactly one terminal record per
// job.

// faultRegistry sends everything to FCM with room for every job in flight at once.
const faultRegistry = `
version: 1
defaults:
  max_in_flight: 32
  rate: 10000
  burst: 1000
  timeout: 20s
  connect_timeout: 2s
  tls_timeout: 2s
  response_header_timeout: 15s
providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
  - id: fallback
    kind: generic
`

// fcmJobs are n jobs to FCM subscriptions, ids "<prefix>-NNN".
func (c *cluster) fcmJobs(prefix string, n int) ([][]byte, []string) {
	c.t.Helper()
	return c.jobsTo(pushsim.FCM, "", prefix, n)
}

// pushes counts the requests pushsim answered per job id.
func (c *cluster) pushes() map[string]int {
	n := map[string]int{}
	for _, d := range c.sim.Deliveries() {
		n[d.JobID]++
	}
	return n
}

// requireDeliveredOnce waits until every id has its terminal record (within deadline), then
// requires what a run without a duplicate send shows: one terminal record each, the same
// verdict from `gateway-worker audit`, and one push each at pushsim.
func (c *cluster) requireDeliveredOnce(ids []string, deadline time.Duration) {
	c.t.Helper()
	c.requireOneRecordEach(ids, deadline)
	c.auditCLI(ids)
	c.requireOnePushEach(ids)
}

// requireOnePushEach fails unless every id reached pushsim exactly once. pushsim records a
// request when it answers it, so it first waits for the requests still in flight (a second send
// made late would otherwise go unseen).
func (c *cluster) requireOnePushEach(ids []string) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.sim.Stats().InFlight > 0 {
		if time.Now().After(deadline) {
			c.t.Fatalf("pushsim still holds %d requests after a minute", c.sim.Stats().InFlight)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := c.pushes()
	var bad []string
	for _, id := range ids {
		if got[id] != 1 {
			bad = append(bad, fmt.Sprintf("%s: %d", id, got[id]))
		}
	}
	if len(bad) > 0 {
		c.t.Errorf("jobs that did not reach pushsim exactly once (id: requests): %s", strings.Join(bad, ", "))
	}
}

// waitRunning waits until every worker has logged that it runs.
func (c *cluster) waitRunning() {
	c.t.Helper()
	c.waitLog(`"msg":"dispatch: running"`, len(c.workers))
}

// waitLog waits until at least n worker log lines (over all workers) contain s.
func (c *cluster) waitLog(s string, n int) {
	c.t.Helper()
	c.logs.Wait(s, n, 30*time.Second)
}

// waitInFlight waits until pushsim holds n requests.
func (c *cluster) waitInFlight(n int64) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.sim.Stats().InFlight < n {
		if time.Now().After(deadline) {
			c.t.Fatalf("pushsim holds %d requests after 30s, want %d", c.sim.Stats().InFlight, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outage runs one Redis outage test: workers start, jobs are sent to an FCM that answers
// after delay, Redis is SIGKILLed killAfter into the sends and restarted down later.
func outage(t *testing.T, workers, jobs int, visibility, delay, killAfter, down time.Duration) {
	c := newCluster(t, clusterOptions{registry: faultRegistry, visibility: visibility})
	c.startWorkers(workers)
	c.waitRunning()
	if err := c.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: delay}); err != nil {
		t.Fatal(err)
	}
	lines, ids := c.fcmJobs("outage", jobs)
	if _, err := c.producer.Enqueue(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	c.waitInFlight(int64(jobs))
	time.Sleep(killAfter) // into the sends, before their answers
	c.redis.Kill()
	time.Sleep(down) // the outage
	c.redis.Restart()
	c.requireDeliveredOnce(ids, 2*time.Minute)
	if c.logs.Count("dispatch: redis is reachable again") == 0 {
		t.Error(`no worker logged "redis is reachable again" after the outage`)
	}
}

// TestRedisOutageNeverCausesASecondSend: answers arrive while Redis is down for longer than
// the visibility timeout; the worker keeps their outcomes until Redis takes them, and nothing
// (its own reclaimer included) sends a job again.
func TestRedisOutageNeverCausesASecondSend(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	outage(t, 1, 10, 5*time.Second, 2*time.Second, time.Second, 8*time.Second)
}

// TestRedisOutageWithTwoWorkersNeverCausesASecondSend: with two workers and an outage longer
// than the visibility timeout, neither takes over the other's entries when Redis is back:
// both are alive, and each records its own outcomes.
func TestRedisOutageWithTwoWorkersNeverCausesASecondSend(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	outage(t, 2, 20, 3*time.Second, 2*time.Second, time.Second, 8*time.Second)
}

// TestSendSlowerThanTheVisibilityTimeoutIsSentOnce: a push service that answers after 6 s,
// within the registry's timeout of 20 s but three times the visibility timeout, with two
// workers: the entries of a live worker are its own however long they idle.
func TestSendSlowerThanTheVisibilityTimeoutIsSentOnce(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t, clusterOptions{registry: faultRegistry, visibility: 2 * time.Second})
	c.startWorker()
	c.startWorker()
	c.waitRunning()
	if err := c.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 6 * time.Second}); err != nil {
		t.Fatal(err)
	}
	lines, ids := c.fcmJobs("slow", 12)
	if _, err := c.producer.Enqueue(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	c.requireDeliveredOnce(ids, time.Minute)
}

// TestRedisOutOfMemory: Redis reaches maxmemory (noeviction) while sends are in flight. Their
// outcomes are still written (GONE ones reach the gone stream), no job is sent twice or
// dead-lettered, the worker says that Redis refuses writes and takes no new work until memory
// is back, then delivers the rest.
func TestRedisOutOfMemory(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t, clusterOptions{
		registry:   strings.Replace(faultRegistry, "max_in_flight: 32", "max_in_flight: 10", 1),
		visibility: 2 * time.Second,
		redis:      []redistest.Option{redistest.WithConfig("maxmemory-policy", "noeviction")},
	})
	c.startWorker()
	c.waitRunning()
	if err := c.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	lines, ids := c.fcmJobs("oom", 20)
	// Every fourth subscription is gone: its answer is 410 and must reach the gone stream.
	var gone []string
	for i := 0; i < len(ids); i += 4 {
		var j struct{ Subscription struct{ Endpoint string } }
		mustUnmarshal(t, lines[i], &j)
		if !c.sim.Expire(j.Subscription.Endpoint) {
			t.Fatal("pushsim does not know the endpoint")
		}
		gone = append(gone, ids[i])
	}
	if _, err := c.producer.Enqueue(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	c.waitInFlight(10) // the first ten are out; ten wait in their lane
	rdb := c.redis.Client(t)
	if err := rdb.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	c.waitLog("dispatch: redis refuses writes", 1)
	// The answers come in and are recorded; no eleventh request goes out while Redis refuses
	// writes.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if st := c.sim.Stats(); st.Requests > 10 {
			t.Fatalf("pushsim got request %d while Redis refused writes", st.Requests)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := rdb.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	c.requireDeliveredOnce(ids, time.Minute)
	if n := rdb.XLen(context.Background(), "wp:{0}:dead").Val(); n != 0 {
		t.Errorf("%d dead records; want none", n)
	}
	goneRecs, err := rdb.XRange(context.Background(), "wp:{0}:gone", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var goneIDs []string
	for _, m := range goneRecs {
		goneIDs = append(goneIDs, m.Values["id"].(string))
	}
	if strings.Join(goneIDs, ",") != strings.Join(gone, ",") && len(goneIDs) != len(gone) {
		t.Errorf("gone stream holds %v, want %v", goneIDs, gone)
	}
	if c.logs.Count("dispatch: redis accepts writes again") == 0 {
		t.Error(`no worker logged "redis accepts writes again"`)
	}
}

// TestOversizedEntriesKeepMemoryBounded: a stream of 8 MB intake entries, some waiting before
// the worker starts and some arriving while it runs, among good jobs. Every oversized entry is
// dead-lettered with its reason, the good jobs are delivered, and the worker's peak RSS stays
// within twice its peak without them (the entries are refused in Redis; only one that arrives
// while the intake is idle travels to the worker, once).
func TestOversizedEntriesKeepMemoryBounded(t *testing.T) {
	t.Parallel() // each has its own Redis, pushsim and workers, and mostly waits
	c := newCluster(t, clusterOptions{registry: faultRegistry})
	// No retries: go-redis sends a command again when its reply times out, and an 8 MB XADD to
	// a Redis with appendfsync always can take seconds on a loaded machine; a second copy of an
	// entry would be a second dead record this test did not ask for.
	rdb := redis.NewClient(&redis.Options{Addr: c.redis.Addr(), MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	hugeEntries := map[string]bool{} // the oversized entries' stream ids

	run := func(name string, big int) (peakKB int64, ids []string) {
		t.Helper()
		lines, ids := c.fcmJobs(name, 60)
		huge := `{"id":"` + name + `-huge","payload":"` + strings.Repeat("x", 8<<20) + `"}`
		xadd := func(v string) {
			id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "wp:{0}:in", Values: []any{"job", v}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(v) > 65536 {
				hugeEntries[id] = true
			}
		}
		// Half the entries wait before the worker starts (a backlog), half arrive while it runs.
		for i := range 30 {
			xadd(string(lines[i]))
			if i < big/2 {
				xadd(huge)
			}
		}
		c.startWorker()
		pid := c.workers[len(c.workers)-1].Pid()
		for i := 30; i < 60; i++ {
			xadd(string(lines[i]))
			if i-30 < big/2 {
				xadd(huge)
				time.Sleep(50 * time.Millisecond) // arrivals spread out, so some meet an idle intake
			}
		}
		rep := c.waitQuiet(ids, time.Minute)
		if rep.ExactlyOne != len(ids) {
			t.Fatalf("%s: audit: %s", name, summarize(rep))
		}
		peakKB = vmHWM(t, pid)
		c.stopAll()
		return peakKB, ids
	}
	base, _ := run("plain", 0)
	peak, ids := run("big", 60)
	t.Logf("worker peak RSS: %d kB without oversized entries, %d kB with 60 of 8 MB (%.2fx)", base, peak, float64(peak)/float64(base))
	if peak > 2*base {
		t.Errorf("peak RSS %d kB with oversized entries is over twice the %d kB without", peak, base)
	}
	dead, err := rdb.XRange(ctx, "wp:{0}:dead", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(hugeEntries) != 60 {
		t.Fatalf("added %d oversized entries, want 60", len(hugeEntries))
	}
	deadOf := map[string]int{}
	for _, m := range dead {
		deadOf[fmt.Sprint(m.Values["entry"])]++
	}
	for id := range hugeEntries {
		if n := deadOf[id]; n != 1 {
			t.Errorf("oversized entry %s has %d dead records, want 1", id, n)
		}
	}
	if len(dead) != 60 {
		t.Errorf("%d dead records, want the 60 oversized entries", len(dead))
	}
	for _, m := range dead {
		if r := m.Values["reason"]; r != fmt.Sprintf("entry is %d bytes; at most 65536", 8<<20+len(`{"id":"big-huge","payload":""}`)) {
			t.Errorf("dead reason %q", r)
			break
		}
		if n := len(m.Values["job"].(string)); n > 65536 {
			t.Errorf("a dead record carries %d bytes of its job", n)
			break
		}
	}
	c.auditCLI(ids)
}

// vmHWM is the peak resident set size of process pid, in kB.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
