package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// clusterShards is the shard count of the cluster tests: twice the masters, so that every
// master serves shards (TestCluster asserts it).
const clusterShards = 6

// maxInFlight is every provider's max_in_flight in pipelineRegistry: the duplicate sends a
// SIGKILLed worker may cause are at most this many per provider.
const maxInFlight = 8

// The pieces the tests' registries share: the timeouts (under defaults:), heartbeats fast
// enough for a killed worker to count as gone within 2 s, and every provider pushsim serves.
const (
	testTimeouts = `  timeout: 5s
  connect_timeout: 2s
  tls_timeout: 2s
  response_header_timeout: 4s
`
	fastHeartbeat = `heartbeat:
  every: 250ms
  stale_after: 2s
`
	everyProvider = registrytest.EveryProvider
)

// pipelineRegistry: every provider, with room to send fast and a ratio breaker that a 30 %
// share of 503s does not open.
const pipelineRegistry = `version: 1
defaults:
  max_in_flight: 8
  rate: 10000
  burst: 1000
  breaker:
    failure_ratio: 0.9
    min_samples: 50
` + testTimeouts + fastHeartbeat + everyProvider

// providerIDs are the lanes of pipelineRegistry.
var providerIDs = []string{"fcm", "autopush", "apple", "wns", "fallback"}

// TestCluster runs the whole pipeline on a Redis Cluster of 3 masters and 3 replicas with 6
// shards and three worker processes, then, each on a prefix of its own on the same cluster,
// checks the fleet-wide token rate, changes the shard count of a live system and checks that
// the duplicate-suppression window reads Redis's clock on every master. It does not
// call t.Parallel, so the rate is measured before the failover tests start.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	checkDefaultSplit(t, c)
	// The hash tag is the shard number alone, so which master serves a shard does not depend
	// on the prefix; shards 0 to 5 must cover every master for the test to mean anything.
	on := map[string][]int{}
	for s := range clusterShards {
		m := c.MasterFor(stream.KeysFor("", s).Intake)
		on[m] = append(on[m], s)
		for _, k := range []string{stream.KeysFor("x", s).Lane("fcm"), stream.KeysFor("x", s).Base + "any{id}"} {
			if got := c.MasterFor(k); got != m {
				t.Fatalf("MasterFor(%s) = %s, want %s like the shard's intake", k, got, m)
			}
		}
	}
	if len(on) != len(c.Masters()) {
		t.Fatalf("shards 0-%d land on %d of %d masters: %v", clusterShards-1, len(on), len(c.Masters()), on)
	}
	// redis-cli's even split of the slots leaves 3, 2 and 1 shards on the masters: move the
	// shards' slots, while they are empty, until each master serves two, as docs/scaling.md
	// says to.
	for {
		full, empty := c.Masters()[0], c.Masters()[0]
		for _, m := range c.Masters() {
			if len(on[m]) > len(on[full]) {
				full = m
			}
			if len(on[m]) < len(on[empty]) {
				empty = m
			}
		}
		if len(on[full])-len(on[empty]) <= 1 {
			break
		}
		shard := on[full][len(on[full])-1]
		moveSlot(t, c, stream.KeysFor("", shard).Intake, full, empty)
		on[full], on[empty] = on[full][:len(on[full])-1], append(on[empty], shard)
	}
	for m, ss := range on {
		if len(ss) != clusterShards/len(c.Masters()) {
			t.Fatalf("master %s serves shards %v after the moves; want %d", m, ss, clusterShards/len(c.Masters()))
		}
		for _, sh := range ss {
			if got := c.MasterFor(stream.KeysFor("", sh).Intake); got != m {
				t.Fatalf("shard %d is on %s, want %s", sh, got, m)
			}
		}
	}
	t.Logf("shards by master: %v", on)

	t.Run("pipeline", func(t *testing.T) { testPipeline(t, c.URL()) })
	t.Run("fleet rate", func(t *testing.T) { testFleetRate(t, c.URL()) })
	t.Run("reshard", func(t *testing.T) { testReshard(t, c.URL()) })
	t.Run("window", func(t *testing.T) { testWindowOnCluster(t, c.URL()) })
}

// testPipeline: three workers; jobs enqueued with `gateway-worker enqueue` before and
// stream.Producer during the run, to every provider; FCM fails 30 % of requests with 503 so
// jobs retry; Apple answers slowly so a worker SIGKILLed mid-run leaves entries that the others
// must reclaim; some subscriptions are expired (GONE) and some jobs invalid (dead). Every job
// ends with exactly one terminal record, every valid one was accepted, duplicates stay within
// the killed worker's slots, records land on every shard, and no output says CROSSSLOT.
func testPipeline(t *testing.T, url string) {
	f := newFleet(t, fleetOptions{url: url, prefix: "pipe", shards: clusterShards, registry: pipelineRegistry})
	ctx := context.Background()
	ws := f.startFleet(3)
	if err := f.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Fail, Ratio: 0.3, RetryAfter: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := f.sim.SetFault(pushsim.Apple, pushsim.Fault{Kind: pushsim.Slow, Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	subs := map[string][]job.Subscription{}
	for _, p := range pushsim.Providers() {
		subs[p] = f.subscriptions(p, 20)
	}
	var good, gone, invalid []string
	var lines [][]byte
	for i := range 1000 {
		p := pushsim.Providers()[i%len(pushsim.Providers())]
		sub := subs[p][(i/len(pushsim.Providers()))%len(subs[p])]
		id := fmt.Sprintf("pipe-%04d", i)
		switch {
		case i%50 == 7:
			// An expired subscription at every provider in turn: 410, GONE.
			gs := f.subscriptions(p, 1)[0]
			if !f.sim.Expire(gs.Endpoint) {
				t.Fatal("pushsim does not know its own endpoint")
			}
			sub = gs
			gone = append(gone, id)
		case i%100 == 13:
			invalid = append(invalid, id)
			lines = append(lines, jobLine(t, id, sub, map[string]any{"vapid_key": "no-such-key"}))
			continue
		case i%100 == 63:
			invalid = append(invalid, id)
			bad := sub
			bad.Endpoint = strings.Replace(bad.Endpoint, "https://", "http://", 1)
			lines = append(lines, jobLine(t, id, bad, nil))
			continue
		default:
			good = append(good, id)
		}
		lines = append(lines, jobLine(t, id, sub, nil))
	}
	all := append(append(slices.Clone(good), gone...), invalid...)

	// The first half through the command, as an operator would; the rest from a Go producer
	// while the workers run and one of them is killed.
	f.enqueueCLI("first-half.jsonl", lines[:500])
	fed := make(chan error, 1)
	go func() { fed <- enqueue(ctx, f.store.Producer(), lines[500:], 25, 40*time.Millisecond) }()

	// Kill a worker while it has Apple's slow requests in flight.
	victim := ws[1]
	deadline := time.Now().Add(30 * time.Second)
	for f.pendingOf(f.consumerOf(victim), providerIDs) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the worker to kill never held 3 entries")
		}
		time.Sleep(10 * time.Millisecond) // polling Redis for a state
	}
	name := f.consumerOf(victim)
	f.kill(victim)
	held := f.pendingOf(name, providerIDs)
	t.Logf("killed %s holding %d entries", name, held)
	if held == 0 {
		t.Fatal("the killed worker held no entries; the test needs some to be reclaimed")
	}
	ws[1] = f.startWorker()
	if err := <-fed; err != nil {
		t.Fatalf("enqueue: %v", err)
	}

	rep := f.waitSettled(all, 2*time.Minute)
	if rep.ExactlyOne != len(all) {
		t.Fatalf("audit: %d of %d with exactly one terminal record, %d with more (%v)", rep.ExactlyOne, len(all), rep.MoreThanOne, rep.Duplicated)
	}
	f.auditCLI(all)
	if left := f.pendingOf(name, providerIDs); left != 0 {
		t.Errorf("the killed worker %s still has %d entries pending; the others should have reclaimed them", name, left)
	}
	f.checkStatus(3)

	// Where each job ended.
	codes := map[string]string{}
	attempts := 0
	shardsWithRecords := map[int]bool{}
	if err := f.insp.Results(ctx, func(r stream.Result) {
		codes[r.ID] = r.Code
		if r.Attempt > 0 {
			attempts++
		}
		shardsWithRecords[stream.ShardOf(r.ID, clusterShards)] = true
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range good {
		if codes[id] != "ACCEPTED" {
			t.Errorf("%s ended %q, want ACCEPTED", id, codes[id])
		}
	}
	for _, id := range gone {
		if codes[id] != "GONE" {
			t.Errorf("%s ended %q, want GONE", id, codes[id])
		}
	}
	dead := map[string]string{}
	if err := f.insp.DeadRecords(ctx, func(d stream.DeadRecord) { dead[d.ID] = d.Code }); err != nil {
		t.Fatal(err)
	}
	for _, id := range invalid {
		if dead[id] != "INVALID_JOB" {
			t.Errorf("%s dead-lettered as %q, want INVALID_JOB", id, dead[id])
		}
	}
	if len(shardsWithRecords) != clusterShards {
		t.Errorf("ledger records on %d of %d shards", len(shardsWithRecords), clusterShards)
	}
	if attempts == 0 {
		t.Error("no job was accepted after a retry; FCM's 503s should have made some")
	}
	goneRecords := 0
	for s := range clusterShards {
		goneRecords += int(f.rdb.XLen(ctx, f.store.Keys(s).Gone).Val())
	}
	if goneRecords != len(gone) {
		t.Errorf("%d gone records over the shards, want %d", goneRecords, len(gone))
	}

	reqs := f.requests()
	acc := accepted(reqs)
	dups, fcm503 := 0, 0
	for _, id := range good {
		if acc[id] == 0 {
			t.Errorf("%s never reached pushsim accepted", id)
		}
		dups += max(acc[id]-1, 0)
		for _, d := range reqs[id] {
			if d.Fault == "fail" {
				fcm503++
			}
		}
	}
	// A SIGKILLed worker can cause a second send only of what it had in flight: at most its
	// slots, max_in_flight per provider.
	bound := maxInFlight * len(providerIDs)
	t.Logf("%d jobs: %d accepted, %d gone, %d invalid; %d 503s retried, %d accepted after a retry; killed worker held %d, duplicate sends %d (bound %d)",
		len(all), len(good), len(gone), len(invalid), fcm503, attempts, held, dups, bound)
	if dups > bound {
		t.Errorf("%d duplicate sends after one SIGKILL; at most %d", dups, bound)
	}
	if fcm503 == 0 {
		t.Error("pushsim answered no 503")
	}
	f.checkLogs()
}

// checkStatus runs `gateway-worker status --json` with the fleet's registry (for the live
// replicas' staleness) and requires every shard's intake and lanes listed, nothing left unread
// or pending in them, replicas live replicas with a breaker state for every provider, and
// Redis's memory of every master.
func (f *fleet) checkStatus(replicas int) {
	f.t.Helper()
	code, out := f.run("status", "--json", "--registry", f.regFile)
	if code != 0 {
		f.t.Fatalf("gateway-worker status: exit %d\n%s", code, out)
	}
	var st struct {
		Shards int `json:"shards"`
		Queues []struct {
			Shard   int    `json:"shard"`
			Stream  string `json:"stream"`
			Lag     *int64 `json:"lag"`
			Pending *int64 `json:"pending"`
		} `json:"queues"`
		Replicas []struct {
			Breakers map[string]string `json:"breakers"`
		} `json:"replicas"`
		Memory []struct {
			Node string `json:"node"`
			Role string `json:"role"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		f.t.Fatalf("gateway-worker status --json: %v\n%s", err, out)
	}
	if st.Shards != f.o.shards {
		f.t.Errorf("status reports %d shards, want %d", st.Shards, f.o.shards)
	}
	seen := map[string]bool{}
	for _, q := range st.Queues {
		seen[fmt.Sprintf("%d/%s", q.Shard, q.Stream)] = true
		if (q.Lag != nil && *q.Lag > 0) || (q.Pending != nil && *q.Pending > 0) {
			f.t.Errorf("status: shard %d %s has lag %v and pending %v once every job is settled", q.Shard, q.Stream, deref(q.Lag), deref(q.Pending))
		}
	}
	for s := range f.o.shards {
		for _, name := range append([]string{"intake"}, lanesOf(providerIDs)...) {
			if !seen[fmt.Sprintf("%d/%s", s, name)] {
				f.t.Errorf("status lists no %s of shard %d", name, s)
			}
		}
	}
	if len(st.Replicas) != replicas {
		f.t.Errorf("status lists %d live replicas, want %d", len(st.Replicas), replicas)
	}
	for _, r := range st.Replicas {
		if len(r.Breakers) != len(providerIDs) {
			f.t.Errorf("a replica publishes breakers %v, want one per provider", r.Breakers)
		}
	}
	masters := 0
	for _, m := range st.Memory {
		if m.Role == "master" {
			masters++
		}
	}
	if masters == 0 {
		f.t.Errorf("status shows the memory of no master: %+v", st.Memory)
	}
}

func lanesOf(providers []string) []string {
	out := make([]string, len(providers))
	for i, p := range providers {
		out[i] = "lane:" + p
	}
	return out
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// moveSlot moves the hash slot of key from master src to master dst with the commands of Redis
// Cluster's resharding (CLUSTER SETSLOT IMPORTING and MIGRATING, MIGRATE of the slot's keys,
// CLUSTER SETSLOT NODE on every master), as docs/scaling.md gives them for redis-cli, and waits
// until every node names dst as the slot's owner.
func moveSlot(t *testing.T, c *redistest.Cluster, key, src, dst string) {
	t.Helper()
	ctx := context.Background()
	srcC, dstC := c.Node(src).Client(t), c.Node(dst).Client(t)
	slot, err := srcC.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	srcID, dstID := srcC.ClusterMyID(ctx).Val(), dstC.ClusterMyID(ctx).Val()
	for _, step := range []struct {
		c    *redis.Client
		args []any
	}{
		{dstC, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", srcID}},
		{srcC, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", dstID}},
	} {
		if err := step.c.Do(ctx, step.args...).Err(); err != nil {
			t.Fatalf("%v: %v", step.args, err)
		}
	}
	host, port, _ := strings.Cut(dst, ":")
	for {
		keys, err := srcC.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := srcC.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("MIGRATE: %v", err)
		}
	}
	// The destination first, then the source, then the other masters.
	order := []string{dst, src}
	for _, m := range c.Masters() {
		if m != dst && m != src {
			order = append(order, m)
		}
	}
	for _, m := range order {
		if err := c.Node(m).Client(t).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil {
			t.Fatalf("CLUSTER SETSLOT %d NODE on %s: %v", slot, m, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		agreed := true
		for _, a := range c.Addrs() {
			shards, err := c.Node(a).Client(t).ClusterShards(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range shards {
				for _, r := range sh.Slots {
					if r.Start <= slot && slot <= r.End && !servedBy(sh, dst) {
						agreed = false
					}
				}
			}
		}
		if agreed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes do not agree that %s serves slot %d after 30s", dst, slot)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis for a state
	}
}

// servedBy reports whether addr is the master of sh (a line of CLUSTER SHARDS).
func servedBy(sh redis.ClusterShard, addr string) bool {
	for _, n := range sh.Nodes {
		if n.Role == "master" && fmt.Sprintf("%s:%d", n.IP, n.Port) == addr {
			return true
		}
	}
	return false
}

// rateRegistry gives WNS a fleet-wide rate of rateR requests a second (and a burst of a tenth
// of it), far below what this machine sends, so the token buckets decide the rate.
const (
	rateR        = 150
	rateRegistry = `version: 1
defaults:
  max_in_flight: 16
` + testTimeouts + fastHeartbeat + `providers:
  - id: wns
    hosts: [notify.windows.com]
    rate: 150
    burst: 15
  - id: fallback
    kind: generic
`
)

// testFleetRate: three workers share WNS's rate of rateR/s; over a steady window of a backlog,
// the accepted sends per second at pushsim are within 5 % of rateR.
func testFleetRate(t *testing.T, url string) {
	f := newFleet(t, fleetOptions{url: url, prefix: "rate", shards: clusterShards, registry: rateRegistry})
	f.startFleet(3)
	// Every replica has seen the other two at least once before the backlog arrives.
	f.waitBeats(3)

	const window = 6 * time.Second
	n := rateR * 11 // a backlog for about 11 s: 2 s of warm-up, the window, and a margin
	subs := f.subscriptions(pushsim.WNS, 50)
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = jobLine(t, fmt.Sprintf("rate-%05d", i), subs[i%len(subs)], nil)
	}
	f.enqueueCLI("rate.jsonl", lines)

	deadline := time.Now().Add(time.Minute)
	var first time.Time
	for first.IsZero() {
		for _, d := range f.sim.Deliveries() {
			if d.Code == "ACCEPTED" && (first.IsZero() || d.At.Before(first)) {
				first = d.At
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no push accepted within a minute")
		}
		time.Sleep(50 * time.Millisecond) // polling pushsim for a state
	}
	// The window starts once the bursts are spent and every bucket runs at its share.
	from := first.Add(2 * time.Second)
	to := from.Add(window)
	for time.Now().Before(to.Add(500 * time.Millisecond)) {
		time.Sleep(100 * time.Millisecond) // waiting for the window to pass on the wall clock
	}
	var at []time.Time
	for _, d := range f.sim.Deliveries() {
		if d.Code == "ACCEPTED" {
			at = append(at, d.At)
		}
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	if len(at) >= n {
		t.Fatalf("the backlog of %d was drained before the window ended; make it longer", n)
	}
	in := 0
	for _, a := range at {
		if !a.Before(from) && a.Before(to) {
			in++
		}
	}
	rate := float64(in) / window.Seconds()
	t.Logf("WNS at rate %d/s shared by 3 workers: %d accepted in %v = %.1f/s (%.2f of the rate)", rateR, in, window, rate, rate/rateR)
	if rate < 0.95*rateR || rate > 1.05*rateR {
		t.Errorf("%.1f accepted/s over the window; want within 5 %% of %d", rate, rateR)
	}
	f.checkLogs()
}

// waitBeats waits until every worker has had time to see n replicas: the heartbeat set has
// held n members for two heartbeats of rateRegistry's 250 ms.
func (f *fleet) waitBeats(n int) {
	f.t.Helper()
	key := stream.ReplicasKey(f.o.prefix)
	deadline := time.Now().Add(30 * time.Second)
	var since time.Time
	for {
		got := f.rdb.ZCard(context.Background(), key).Val()
		switch {
		case got != int64(n):
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) > 600*time.Millisecond:
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s did not hold %d replicas steadily within 30s", key, n)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis for a state
	}
}
