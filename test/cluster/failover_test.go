package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// What a failover loses, and why none of it loses a job.
//
// Redis replicates asynchronously, so the replica promoted in a dead master's place may lack
// the master's last writes: those it acknowledged to clients but had not yet sent. A script's
// effects replicate as one transaction and the replica applies the master's writes in order, so
// what survives is the master's state as of some moment: the lost writes are the latest
// transitions, undone, on every shard the master served. Undoing a transition puts the job back
// where it was, which costs a resend at worst:
//
//   - read_intake, a lane's XREADGROUP, reclaim: the entry is unread again (or pending for the
//     consumer it was pending for before) and is read or reclaimed again. A worker that holds
//     an entry the new master no longer lists as its own finds out at the next script, whose
//     ownership check changes nothing; an entry left pending for a live worker that lost track
//     of it is reclaimed by that worker itself after the visibility timeout.
//   - to_lane: the intake entry is back and the job leaves the jobs index; it is routed again.
//   - to_delayed, promote: the lane entry (or the delayed member) is back; it is retried again.
//   - finish, to_dead, ack: the lane entry is back pending, without its record, sent mark or
//     gone mark; it is sent again and recorded then. This, and a send in flight whose lane entry
//     was handed out again, are the duplicate sends a failover can cause: jobs in flight at the
//     kill, or whose outcome had just been written. A finish written by the old owner on the
//     new master records an accepted send even when it no longer owns the entry (sent mark
//     included), so the job keeps one terminal record.
//   - heartbeat: a beat is undone; the next one, a period later, counts the replica again.
//   - the jobs index and the sent marks: undone with the to_lane or finish that wrote them, so
//     a copy enqueued in that moment may be sent as a new job.
//
// A producer's XADD is different: undone, the job is gone, since nothing else holds it. With
// stream.WaitReplicas (`enqueue --wait-replicas`), Enqueue returns only once a replica has the
// entries, and Redis promotes the most up-to-date replica, so an acknowledged enqueue survives;
// one not acknowledged in time comes back as an error, and the producer sends it again (a copy
// of a job that is held or was accepted is acknowledged unsent). Without the wait, an enqueue
// reported as written can be lost: stream's TestProducerWithoutWaitLosesAJobToAFailover shows
// one. The producers below wait, so every job they were told is enqueued must be delivered.

// failoverRegistry sends everything to FCM, which answers after failoverDelay, so that each
// worker has its max_in_flight requests in flight most of the time.
const failoverRegistry = `version: 1
defaults:
  max_in_flight: 8
  rate: 10000
  burst: 1000
` + testTimeouts + fastHeartbeat + `providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
  - id: fallback
    kind: generic
`

const (
	failoverWorkers = 3
	failoverJobs    = 1500
	failoverDelay   = 50 * time.Millisecond
)

// topology is what the failover scenario needs of a Redis setup.
type topology struct {
	url    string
	shards int
	// killMaster SIGKILLs a master that serves shards and returns the shards it served.
	killMaster func() (shards []int)
	// awaitPromotion waits until a replica serves the killed master's shards.
	awaitPromotion func()
	// restartKilled starts the killed master again and waits until it has rejoined as a
	// replica of the promoted one.
	restartKilled func()
}

// TestClusterFailover: a master of a 3-master cluster, the one that also holds the heartbeats
// when it serves shards too, is SIGKILLed while jobs flow; its replica takes over its slots.
func TestClusterFailover(t *testing.T) {
	t.Parallel() // a Redis topology, pushsim and workers of its own; it measures no rate
	c := redistest.StartCluster(t)
	var killed string
	failover(t, topology{
		url:    c.URL(),
		shards: clusterShards,
		killMaster: func() []int {
			// The master of the heartbeats' slot, when it serves shards too: its loss also
			// stops every replica's heartbeat for the length of the failover.
			on := map[string][]int{}
			for s := range clusterShards {
				m := c.MasterFor(stream.KeysFor("", s).Intake)
				on[m] = append(on[m], s)
			}
			killed = c.MasterFor(stream.ReplicasKey(""))
			if len(on[killed]) == 0 {
				for m, ss := range on {
					if len(ss) > len(on[killed]) {
						killed = m
					}
				}
			}
			t.Logf("killing master %s: shards %v, heartbeats %v", killed, on[killed], c.MasterFor(stream.ReplicasKey("")) == killed)
			c.KillMaster(killed)
			return on[killed]
		},
		awaitPromotion: func() {
			t0 := time.Now()
			promoted := c.WaitPromotion(killed)
			t.Logf("%s took over the slots of %s %v after the kill", promoted, killed, time.Since(t0).Round(100*time.Millisecond))
		},
		restartKilled: func() { c.Restart(killed) },
	})
}

// TestSentinelFailover: the master of a Sentinel setup is SIGKILLed while jobs flow; the
// Sentinels promote its replica and every client follows them there.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // a Redis topology, pushsim and workers of its own; it measures no rate
	s := redistest.StartSentinel(t)
	const shards = 2
	var killed string
	failover(t, topology{
		url:    s.URL(),
		shards: shards,
		killMaster: func() []int {
			killed = s.KillMaster()
			return []int{0, 1}
		},
		awaitPromotion: func() {
			t0 := time.Now()
			promoted := s.WaitFailover(killed)
			t.Logf("the Sentinels promoted %s %v after the kill", promoted, time.Since(t0).Round(100*time.Millisecond))
		},
		restartKilled: func() { s.Restart(killed) },
	})
}

// failover runs the scenario on top: three workers, jobs enqueued with the wait for a replica
// (by `gateway-worker enqueue --wait-replicas 1` before, by stream.Producer while the master
// dies), the master SIGKILLed mid-run, the replica promoted, the old master restarted as its
// replica (as a pod would be). Then: every job reached pushsim
// accepted at least once, every job has exactly one terminal record, and the jobs sent twice
// are at most what the fleet had in flight, all of them on the killed master's shards.
func failover(t *testing.T, topo topology) {
	f := newFleet(t, fleetOptions{url: topo.url, shards: topo.shards, registry: failoverRegistry})
	ctx := context.Background()
	f.startFleet(failoverWorkers)
	if err := f.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: failoverDelay}); err != nil {
		t.Fatal(err)
	}
	subs := f.subscriptions(pushsim.FCM, 50)
	lines := make([][]byte, failoverJobs)
	ids := make([]string, failoverJobs)
	for i := range lines {
		ids[i] = fmt.Sprintf("fo-%05d", i)
		lines[i] = jobLine(t, ids[i], subs[i%len(subs)], nil)
	}
	const first = 300
	f.enqueueCLI("before.jsonl", lines[:first], "--wait-replicas", "1", "--wait-timeout", "2s")

	// The rest arrive at about 250 jobs a second, the fleet's pace, so the kill lands while
	// jobs flow and the producer sees the failover too.
	feedCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p := f.store.Producer(stream.WaitReplicas(1, 2*time.Second))
	fed := make(chan error, 1)
	go func() { fed <- enqueue(feedCtx, p, lines[first:], 20, 80*time.Millisecond) }()

	// Into the flow: the first jobs are delivered and requests are in flight.
	deadline := time.Now().Add(30 * time.Second)
	for f.sim.Stats().Requests < first/2 || f.sim.Stats().InFlight == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pushsim got %d requests in 30s", f.sim.Stats().Requests)
		}
		time.Sleep(10 * time.Millisecond) // polling pushsim for a state
	}
	inFlight := f.sim.Stats().InFlight
	killedShards := topo.killMaster()
	topo.awaitPromotion()
	// The promoted master has no replica of its own until the old one comes back as one:
	// until then the producer's WAIT cannot be met, and it keeps its jobs and tries again.
	topo.restartKilled()
	if err := <-fed; err != nil {
		t.Fatalf("enqueue: %v", err)
	}

	rep := f.waitSettled(ids, 2*time.Minute)
	if rep.ExactlyOne != len(ids) {
		t.Fatalf("audit: %d of %d with exactly one terminal record; %d with more: %v", rep.ExactlyOne, len(ids), rep.MoreThanOne, rep.Duplicated)
	}
	f.auditCLI(ids)

	acc := accepted(f.requests())
	var lost, dupIDs []string
	dups := 0
	for _, id := range ids {
		switch n := acc[id]; {
		case n == 0:
			lost = append(lost, id)
		case n > 1:
			dups += n - 1
			dupIDs = append(dupIDs, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d jobs never reached pushsim accepted: %v", len(lost), lost)
	}
	// A failover resends only jobs in flight at the kill or whose outcome had just been
	// written there: at most every worker's FCM slots.
	bound := failoverWorkers * maxInFlight
	t.Logf("%d jobs, %d requests in flight at the kill; %d duplicate sends (bound %d): %v", len(ids), inFlight, dups, bound, dupIDs)
	if dups > bound {
		t.Errorf("%d duplicate sends after one failover; at most %d (%d workers x max_in_flight %d)", dups, bound, failoverWorkers, maxInFlight)
	}
	for _, id := range dupIDs {
		if s := stream.ShardOf(id, topo.shards); !slices.Contains(killedShards, s) {
			t.Errorf("%s was sent twice but its shard %d was not on the killed master (%v)", id, s, killedShards)
		}
	}
	f.checkLogs()
}

// BenchmarkFailoverSoak is the long form of TestClusterFailover: b.N failovers of a 3-master
// cluster in a row, a different master each time, each killed under load, its replica
// promoted and the old master restarted as a replica, while a producer that waits for a
// replica writes all along. It fails as the test does (a job lost, a terminal record missing
// or doubled, duplicates over the bound: every worker's slots per failover), and reports the
// time from each kill to the promotion and the duplicate sends.
//
//	go test -run '^$' -bench BenchmarkFailoverSoak -benchtime 5x ./test/cluster/
func BenchmarkFailoverSoak(b *testing.B) {
	c := redistest.StartCluster(b)
	f := newFleet(b, fleetOptions{url: c.URL(), shards: clusterShards, registry: failoverRegistry})
	f.startFleet(failoverWorkers)
	if err := f.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Slow, Delay: failoverDelay}); err != nil {
		b.Fatal(err)
	}
	fd := feed(b, f.store.Producer(stream.WaitReplicas(1, 2*time.Second)), "soak", f.subscriptions(pushsim.FCM, 50))
	var promotion time.Duration
	b.ResetTimer()
	for i := range b.N {
		f.waitDelivered(int(f.sim.Stats().Codes[pushsim.FCM]["ACCEPTED"]) + 100) // jobs flow
		victim := c.Masters()[i%len(c.Masters())]
		t0 := time.Now()
		c.KillMaster(victim)
		c.WaitPromotion(victim)
		promotion += time.Since(t0)
		c.Restart(victim)
	}
	b.StopTimer()
	ids := fd.Stop(b, true)
	rep := f.waitSettled(ids, 3*time.Minute)
	if rep.ExactlyOne != len(ids) {
		b.Fatalf("audit: %d of %d with exactly one terminal record; more than one: %v", rep.ExactlyOne, len(ids), rep.Duplicated)
	}
	acc := accepted(f.requests())
	dups := 0
	for _, id := range ids {
		if acc[id] == 0 {
			b.Errorf("%s never reached pushsim accepted", id)
		}
		dups += max(acc[id]-1, 0)
	}
	if bound := b.N * failoverWorkers * maxInFlight; dups > bound {
		b.Errorf("%d duplicate sends over %d failovers; at most %d", dups, b.N, bound)
	}
	f.checkLogs()
	b.ReportMetric(float64(len(ids)), "jobs")
	b.ReportMetric(float64(dups)/float64(b.N), "dup-sends/failover")
	b.ReportMetric(promotion.Seconds()/float64(b.N), "s-to-promotion")
}
