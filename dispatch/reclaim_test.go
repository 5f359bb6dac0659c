package dispatch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// ghostRead makes consumer "ghost" read every intake entry and then die: the entries stay
// pending under its name.
func ghostRead(t *testing.T, e *env, want int) *stream.Store {
	t.Helper()
	ghost := e.newStore("ghost")
	if err := ghost.Setup(context.Background(), []string{"fcm"}); err != nil {
		t.Fatal(err)
	}
	got, _, err := ghost.ReadIntake(context.Background(), 0, 100, 0)
	if err != nil || len(got) != want {
		t.Fatalf("ghost read %d intake entries (%v), want %d", len(got), err, want)
	}
	return ghost
}

func TestReclaimedIntakeEntriesAreHandledLikeFreshOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.enqueue(job("orphan-good", sub, "x"), job("orphan-bad", sub, "x", "ttl", -1))
	ghostRead(t, e, 2)

	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 50 * time.Millisecond
	e.passReclaimGrace(e.start(cfg))
	if r := e.waitRecord("results", "orphan-good"); r["code"] != "ACCEPTED" {
		t.Errorf("orphan-good: %v", r)
	}
	if d := e.waitRecord("dead", "orphan-bad"); d["code"] != "INVALID_JOB" || d["reason"] != "ttl: must be at least 0, got -1" {
		t.Errorf("orphan-bad: %v", d)
	}
	if p := e.pending(e.store.Keys(0).Intake); p != 0 {
		t.Errorf("%d intake entries still pending", p)
	}
}

func TestEntriesDeliveredTooOftenGoToDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.enqueue(job("cursed", sub, "x"))
	ghostRead(t, e, 1)

	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 50 * time.Millisecond
	cfg.MaxDeliveries = 1 // the ghost's read was the one delivery allowed
	e.passReclaimGrace(e.start(cfg))
	d := e.waitRecord("dead", "cursed")
	if d["code"] != stream.CodeTooManyDeliveries || d["reason"] != "delivered 1 times without finishing" {
		t.Errorf("dead record %v", d)
	}
	if n := len(e.deliveriesOf("cursed")); n != 0 {
		t.Errorf("pushsim saw %d requests, want 0", n)
	}
}

func TestJanitorRemovesOnlyIdleConsumersWithNothingPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.enqueue(job("held", sub, "x"))
	ghostRead(t, e, 1) // "ghost" holds the entry
	idle := e.newStore("idle")
	if _, _, err := idle.ReadIntake(context.Background(), 0, 1, 0); err != nil { // joins, reads nothing
		t.Fatal(err)
	}
	in := e.store.Keys(0).Intake

	cfg := e.config(e.store)
	cfg.JanitorIdle = 50 * time.Millisecond
	cfg.VisibilityTimeout = time.Hour // keep the ghost's entry where it is
	e.start(cfg)
	waitFor(t, "the idle consumer removed", func() bool { return !slices.Contains(e.consumers(in), "idle") })
	if cs := e.consumers(in); !slices.Contains(cs, "ghost") {
		t.Errorf("consumers %v: the ghost, which still has an entry pending, was removed", cs)
	}
	if p := e.pending(in); p != 1 {
		t.Errorf("%d entries pending, want the ghost's 1", p)
	}
}

func TestTTLZeroIsSentOnceAndNeverRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	fcm := e.subscribe(pushsim.FCM, e.key)
	apple := e.subscribe(pushsim.Apple, e.key)
	setFault(t, e, pushsim.Apple, pushsim.Fault{Kind: pushsim.Fail, Status: 503})
	// Enqueued a second ago: any queueing at all would expire a TTL-0 job under "remaining <= 0".
	at := e.clock.Now().Add(-time.Second).UnixMilli()
	e.enqueue(job("now-or-never", fcm, "x", "ttl", 0, "enqueued_at", at), job("never", apple, "x", "ttl", 0))
	e.start(e.config(e.store))

	if r := e.waitRecord("results", "now-or-never"); r["code"] != "ACCEPTED" {
		t.Errorf("now-or-never: %v", r)
	}
	if ds := e.deliveriesOf("now-or-never"); len(ds) != 1 || ds[0].TTL != 0 {
		t.Errorf("pushsim saw %d requests, want one with TTL 0", len(ds))
	}
	if r := e.waitRecord("results", "never"); r["code"] != "EXPIRED" || r["attempt"] != "0" {
		t.Errorf("never: %v, want EXPIRED instead of a retry", r)
	}
}

// laneSet is the lanes of every (shard, provider) of a worker, built as Run builds them but
// not started, so a test can drive one reclaim round or one lane by hand.
type laneSet struct {
	cfg       *Config
	limits    *fleetLimits
	health    *redisHealth
	heartbeat *heartbeat
	byShard   []map[string]*lane
	table     *laneTable
	ids       []string
}

func (e *env) newLaneSet(cfg Config) *laneSet {
	e.t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		e.t.Fatal(err)
	}
	ls := &laneSet{cfg: &cfg}
	for _, p := range cfg.Registry.Providers() {
		ls.ids = append(ls.ids, p.ID)
	}
	if err := cfg.Store.Setup(context.Background(), ls.ids); err != nil {
		e.t.Fatal(err)
	}
	ls.limits = newFleetLimits(ls.cfg)
	ls.health = newRedisHealth(cfg.Store.Shards(), cfg.Logger, cfg.Now(), nil)
	ls.heartbeat = newHeartbeat(heartbeatParams{cfg: ls.cfg, limits: ls.limits, health: ls.health, hb: cfg.Registry.Heartbeat()})
	for s := 0; s < cfg.Store.Shards(); s++ {
		ls.byShard = append(ls.byShard, map[string]*lane{})
		for _, id := range ls.ids {
			ls.byShard[s][id] = newLane(laneParams{cfg: ls.cfg, store: cfg.Store, shard: s, provider: id,
				lim: ls.limits.get(id), hosts: ls.limits.hosts, health: ls.health, abort: make(chan struct{})})
		}
	}
	ls.table = newLaneTable(cfg.Store.Shards())
	for _, id := range ls.ids {
		var byShard []*lane
		for s := range ls.byShard {
			byShard = append(byShard, ls.byShard[s][id])
		}
		ls.table.add(id, byShard)
	}
	// A lane the test drives by hand (dispatch) leaves its send goroutines idle in the lane's
	// pool, where they stay until the lane is told to stop.
	e.t.Cleanup(func() {
		for _, lanes := range ls.byShard {
			for _, l := range lanes {
				l.shutdown()
				l.workers.wait()
			}
		}
	})
	return ls
}

// allowReclaim steps the clock past the reclaim grace and beats, so that the set's reclaimer
// may run.
func (ls *laneSet) allowReclaim(e *env) {
	e.t.Helper()
	e.stepReclaimGrace()
	if err := ls.heartbeat.beat(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// idle reports whether l holds no entry: nothing offered waits and no send runs.
func (l *lane) idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held) == 0 && len(l.offered) == 0
}

// TestReclaimedEntryIsSentOnlyWhileStillOurs: the reclaimer may claim an entry of our own just
// as the goroutine that had it finishes it, and offer it to the lane once that goroutine has
// let go; or another replica may take it over first. The lane checks the entry is still ours
// before it sends.
func TestReclaimedEntryIsSentOnlyWhileStillOurs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// meanwhile is what happens to the entry, read by the worker, before it is offered.
		meanwhile  func(t *testing.T, e *env, en stream.Entry, raw []byte)
		deliveries int
		results    int
	}{
		{"still ours", func(*testing.T, *env, stream.Entry, []byte) {}, 1, 1},
		{"finished by the goroutine that had it", func(t *testing.T, e *env, en stream.Entry, raw []byte) {
			// That goroutine's send failed, and it queued the retry.
			v, err := e.store.ToDelayed(context.Background(), en, stream.RetryRecord{
				ID: "claimed", Provider: "fcm", Due: e.clock.Now().Add(time.Hour), Attempt: 1,
				Job: string(raw), EnqueuedAtMs: e.clock.Now().UnixMilli(), At: e.clock.Now(),
			})
			if err != nil || v != stream.Queued {
				t.Fatalf("ToDelayed = %v, %v", v, err)
			}
		}, 0, 0},
		{"taken over by another replica", func(t *testing.T, e *env, en stream.Entry, _ []byte) {
			other := e.newStore("w2")
			if got, _, err := other.Reclaim(context.Background(), 0, en.Stream, 0, 10, 0, nil); err != nil || len(got) != 1 {
				t.Fatalf("w2 Reclaim: %d entries, %v", len(got), err)
			}
		}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			sub := e.subscribe(pushsim.FCM, e.key)
			ls := e.newLaneSet(e.config(e.store))
			raw := job("claimed", sub, "x")
			e.laneEntry("fcm", 0, raw)
			read, err := e.store.ReadLane(context.Background(), 0, "fcm", jobfmt.ClassTransactional, 1, 0)
			if err != nil || len(read) != 1 {
				t.Fatalf("ReadLane: %d entries, %v", len(read), err)
			}
			c.meanwhile(t, e, read[0], raw)

			l := ls.byShard[0]["fcm"]
			if !l.offer(read[0], time.Now()) {
				t.Fatal("offer refused")
			}
			var wg sync.WaitGroup
			l.start(&wg)
			waitFor(t, "the offered entry handled", l.idle)
			l.shutdown()
			wg.Wait()
			if n := len(e.deliveriesOf("claimed")); n != c.deliveries {
				t.Errorf("pushsim saw %d requests, want %d", n, c.deliveries)
			}
			if n := len(e.all("results")); n != c.results {
				t.Errorf("%d ledger records, want %d", n, c.results)
			}
		})
	}
}

// reclaimer is a reclaimer over the set's lanes, with an intake per shard.
func (ls *laneSet) reclaimer() *reclaimer {
	var intakes []*intake
	for s := range ls.byShard {
		intakes = append(intakes, newIntake(intakeParams{cfg: ls.cfg, shard: s, limits: ls.limits, health: ls.health}))
	}
	return newReclaimer(reclaimerParams{cfg: ls.cfg, intakes: intakes, lanes: ls.table,
		health: ls.health, heartbeat: ls.heartbeat, hb: ls.cfg.Registry.Heartbeat()})
}

// TestReclaimSpendsAProviderRoomOnceOverShards: a provider's free slots are shared by its
// lanes on every shard, so one round claims no more of its entries, over all shards, than it
// has free slots.
func TestReclaimSpendsAProviderRoomOnceOverShards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{shards: 2, registry: testRegistry(map[string]string{"fcm": "max_in_flight: 2"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 10 * time.Millisecond
	ls := e.newLaneSet(cfg)
	// A consumer that then dies reads three entries of each shard's fcm lane.
	ghost := e.newStore("ghost")
	for s := range 2 {
		for i := range 3 {
			raw := job(fmt.Sprintf("s%d-%d", s, i), sub, "x")
			e.xadd(e.store.Keys(s).Lane("fcm"), "job", string(raw), "provider", "fcm", "attempt", "0",
				"enqueued_at", fmt.Sprint(e.clock.Now().UnixMilli()))
		}
		if got, err := ghost.ReadLane(context.Background(), s, "fcm", jobfmt.ClassTransactional, 10, 0); err != nil || len(got) != 3 {
			t.Fatalf("ghost ReadLane(%d): %d entries, %v", s, len(got), err)
		}
	}

	r := ls.reclaimer()
	ls.allowReclaim(e)
	offered := func() int {
		n := 0
		for s := range ls.byShard {
			n += len(ls.byShard[s]["fcm"].offered)
		}
		return n
	}
	round := func() {
		if err := r.reclaim(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "entries reclaimed", func() bool { round(); return offered() > 0 })
	round() // the lanes have not started what they were offered: no room is left
	if n, free := offered(), ls.limits.get("fcm").slots.Free(); n != free {
		t.Errorf("%d entries offered to fcm's lanes over 2 shards, want its %d free slots", n, free)
	}
	claimed := 0
	for s := range 2 {
		for _, en := range e.pendingOf(e.store.Keys(s).Lane("fcm")) {
			if en.Consumer == "w1" {
				claimed++
			}
		}
	}
	if claimed != 2 {
		t.Errorf("%d entries claimed in Redis, want 2", claimed)
	}
}

// pendingOf lists the pending entries of a stream's group.
func (e *env) pendingOf(stream string) []redis.XPendingExt {
	e.t.Helper()
	p, err := e.redis.Client(e.t).XPendingExt(context.Background(), &redis.XPendingExtArgs{
		Stream: stream, Group: "gateway", Start: "-", End: "+", Count: 1000,
	}).Result()
	if err != nil {
		e.t.Fatalf("XPENDING %s: %v", stream, err)
	}
	return p
}

// TestLongHeldEntryIsSentOnlyWhileStillOurs: an entry the lane read itself, then held past
// the re-check time (waiting for a slot or a token), may meanwhile have been reclaimed by
// another replica, which sends it too. The lane asks Redis before sending such an entry.
func TestLongHeldEntryIsSentOnlyWhileStillOurs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		takenOver  bool
		deliveries int
	}{
		{"still ours", false, 1},
		{"taken over by another replica while held", true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			sub := e.subscribe(pushsim.FCM, e.key)
			ls := e.newLaneSet(e.config(e.store))
			raw := job("held", sub, "x")
			e.laneEntry("fcm", 0, raw)
			read, err := e.store.ReadLane(context.Background(), 0, "fcm", jobfmt.ClassTransactional, 1, 0)
			if err != nil || len(read) != 1 {
				t.Fatalf("ReadLane: %d entries, %v", len(read), err)
			}
			if c.takenOver {
				other := e.newStore("w2")
				if got, _, err := other.Reclaim(context.Background(), 0, read[0].Stream, 0, 10, 0, nil); err != nil || len(got) != 1 {
					t.Fatalf("w2 Reclaim: %d entries, %v", len(got), err)
				}
			}
			l := ls.byShard[0]["fcm"]
			l.recheckAfter = 0 // every entry counts as held long enough to re-check
			if !l.startDelivery(context.Background(), context.Background(), read[0], false, time.Now()) {
				t.Fatal("startDelivery refused the entry")
			}
			l.inflight.Wait()
			if n := len(e.deliveriesOf("held")); n != c.deliveries {
				t.Fatalf("pushsim saw %d requests, want %d", n, c.deliveries)
			}
		})
	}
}

// TestHeldEntryIsMarkedRefreshedOnlyWhenTheRefreshRan: the reclaimer marks the entries a lane
// holds as refreshed only once the script that resets their idle time has run. After a call
// that failed, Redis's idle time still runs from the read: the next round passes the entry
// again, so that it is refreshed before its own reclaim looks for idle entries, rather than
// claimed as one this worker lost track of and counted as a second delivery.
func TestHeldEntryIsMarkedRefreshedOnlyWhenTheRefreshRan(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 200 * time.Millisecond
	ls := e.newLaneSet(cfg)
	lane := e.store.Keys(0).Lane("fcm")
	e.laneEntry("fcm", 0, job("held", sub, "x"))
	readAt := time.Now()
	read, err := e.store.ReadLane(context.Background(), 0, "fcm", jobfmt.ClassTransactional, 1, 0)
	if err != nil || len(read) != 1 {
		t.Fatalf("ReadLane: %d entries, %v", len(read), err)
	}
	l := ls.byShard[0]["fcm"]
	l.hold(read[0], readAt)
	time.Sleep(cfg.VisibilityTimeout + 50*time.Millisecond) // idle in Redis past the timeout

	// The marks are compared with moments taken before each call, not with durations, so a
	// slow machine cannot make the test pass or fail.
	r := ls.reclaimer()
	failed, cancel := context.WithCancel(context.Background())
	cancel()
	beforeFailed := time.Now()
	if _, _, err := r.claimLane(failed, l, lane, 1, nil); err == nil {
		t.Fatal("claimLane with a cancelled context: no error")
	}
	if got := l.heldSince(lane, beforeFailed); len(got) != 1 {
		t.Fatalf("entries marked unrefreshed since before the failed call: %v, want the one read", got)
	}
	before := time.Now()
	claimed, _, err := r.claimLane(context.Background(), l, lane, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 0 {
		t.Errorf("claimed %d entries the lane holds, want none", len(claimed))
	}
	for _, p := range e.pendingOf(lane) {
		// Reset by the call: idle no longer than the time since it began (Redis counts in ms).
		if since := time.Since(before); p.RetryCount != 1 || p.Idle > since+time.Millisecond {
			t.Errorf("entry %s: %d deliveries, idle %v %v after the call began; want 1 delivery, its idle time reset", p.ID, p.RetryCount, p.Idle, since)
		}
	}
	if got := l.heldSince(lane, before); len(got) != 0 {
		t.Errorf("entries marked unrefreshed since before the call that refreshed them: %v, want none", got)
	}
}
