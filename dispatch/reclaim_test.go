package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

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
	got, _, err := ghost.ReadIntake(context.Background(), 0, jobfmt.ClassTransactional, 100, 0)
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
	if _, _, err := idle.ReadIntake(context.Background(), 0, jobfmt.ClassTransactional, 1, 0); err != nil { // joins, reads nothing
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
				lim: ls.limits.get(id), hosts: ls.limits.hosts, health: ls.health, abort: make(chan struct{}), inHand: newInHand()})
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

// begin starts e on lane l as its reader does: with a slot and a token taken for it.
func (ls *laneSet) begin(t *testing.T, l *lane, e stream.Entry) {
	t.Helper()
	if l.lim.slots.Take(1) != 1 || l.lim.tokens.Take(time.Now(), 1, 0) != 1 {
		t.Fatal("no free slot or token for the entry")
	}
	ctx := context.Background()
	l.begin(ctx, ctx, e)
}

// TestReclaimedLaneEntryIsSentOnceFromItsLane: a consumer reads a lane entry and dies; once its
// heartbeat is stale and the entry idle past the visibility timeout, a live worker hands the
// entry back to its lane, reads it there like any other and sends it once. A copy whose job was
// accepted meanwhile (the window has it) is acknowledged unsent.
func TestReclaimedLaneEntryIsSentOnceFromItsLane(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.laneEntry("fcm", 0, job("orphan", sub, "x"))
	e.laneEntry("fcm", 0, job("sent-already", sub, "x"))
	e.laneEntry("fcm", 0, job("sent-already", sub, "x"))
	ghost := e.newStore("ghost")
	read, _, err := ghost.ReadLanes(context.Background(), 0, "fcm", stream.LaneRead{Total: 3})
	if err != nil || len(read) != 3 {
		t.Fatalf("ghost read %d lane entries (%v), want 3", len(read), err)
	}
	// The ghost's send of one copy of sent-already was accepted and recorded before it died.
	if ok, err := ghost.Finish(context.Background(), read[2],
		stream.Result{ID: "sent-already", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: e.clock.Now()}); err != nil || !ok {
		t.Fatalf("ghost Finish = %v, %v", ok, err)
	}
	cfg := e.config(e.store)
	cfg.VisibilityTimeout = 50 * time.Millisecond
	e.passReclaimGrace(e.start(cfg))
	if r := e.waitRecord("results", "orphan"); r["code"] != "ACCEPTED" || r["attempt"] != "0" {
		t.Errorf("orphan: %v", r)
	}
	if n := len(e.deliveriesOf("orphan")); n != 1 {
		t.Errorf("pushsim received orphan %d times, want once", n)
	}
	lane := e.store.Keys(0).Lane("fcm")
	waitFor(t, "the lane drained", func() bool { return e.xlen(lane) == 0 && e.pending(lane) == 0 })
	if n := len(e.deliveriesOf("sent-already")); n != 0 {
		t.Errorf("pushsim received sent-already %d times; its handed-back copy must be acknowledged unsent", n)
	}
	if rs := e.byID("results")["sent-already"]; len(rs) != 1 {
		t.Errorf("ledger records of sent-already: %v; want the ghost's one", rs)
	}
}

// TestStartHandsBackWhatItsNameLeft: an entry pending under the worker's own name (an earlier
// process of the same name died with it) goes back to its lane when the worker starts, and is
// sent within moments, not a visibility timeout later.
func TestStartHandsBackWhatItsNameLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{wallClock: true})
	sub := e.subscribe(pushsim.FCM, e.key)
	e.laneEntry("fcm", 0, job("left-behind", sub, "x"))
	before := e.newStore(e.store.Consumer())
	if got, _, err := before.ReadLanes(context.Background(), 0, "fcm", stream.LaneRead{Total: 1}); err != nil || len(got) != 1 {
		t.Fatalf("the earlier process read %d entries (%v), want 1", len(got), err)
	}
	began := time.Now()
	e.start(e.config(e.store)) // visibility timeout: the default minute
	if r := e.waitRecord("results", "left-behind"); r["code"] != "ACCEPTED" {
		t.Errorf("left-behind: %v", r)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the entry an earlier process of this name left was sent %v after the start", took)
	}
}
