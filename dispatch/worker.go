// Package dispatch runs the worker: the loops that take delivery jobs from Redis Streams
// (through package stream, the only code that talks to Redis), send them through the adapters
// and record where each job goes next.
//
// One Run starts, per shard, an intake loop (validate, route, move to a provider's lane) and one
// lane consumer per provider (read only as many jobs as the provider has free in-flight slots,
// send, record the outcome), plus one promoter (due retries back to their lanes), one reclaimer
// (entries a dead consumer left pending), one janitor (idle consumers with nothing pending), one
// heartbeat (how many replicas share the fleet-wide rates) and, when registry.yaml has a
// budget, one budget loop (in-flight slots shared by traffic).
// Every move of a job is one atomic script in stream that first checks the entry is still this
// consumer's, so a worker that lost an entry to the reclaimer cannot act on it, and a job is in
// exactly one place at a time.
//
// Provider isolation lives in the lanes. Each provider has, per process, an in-flight budget
// (limits.Slots: a cap, a share for retries, a cap per recipient), this replica's share of its
// token bucket, and a ratio breaker; unknown hosts share a host breaker. A provider that
// stalls fills its own slots, one that fails opens its own breaker, and in both cases its
// lanes stop reading while the other providers' lanes go on at their own rates.
//
// Delivery is at least once: an entry is acknowledged only after its outcome is written, so a
// worker that dies mid-send leaves the entry pending and another replica reclaims and sends it
// again (unless the sent mark says the first send was accepted).
package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Sender sends one message and says what came of it; *adapter.Sender is one. Declared here, by
// its only caller, so tests can put anything behind it.
type Sender interface {
	Send(ctx context.Context, m *adapter.Message) taxonomy.Outcome
}

// Config is everything Run needs. Zero durations and counts take the defaults listed per field.
type Config struct {
	Store    *stream.Store       // required; its Options name this process's consumer
	Sender   Sender              // required
	Registry *providers.Registry // required: lanes are its providers, routing is its Resolve
	// Keys are the VAPID keys by the name jobs give in vapid_key ("default" when a job gives
	// none). Required, at least one.
	Keys map[string]*vapid.Key

	// Now is the clock for TTLs, retry due times and ledger times; default time.Now.
	Now func() time.Time
	// Rand draws the retry jitter in [0, 1); default math/rand/v2's Float64. Lane consumers call
	// it concurrently, so it must be safe for concurrent use.
	Rand func() float64
	// Backoff defaults to 5 s doubling to 10 min, 8 retries; MaxRetries < 0 turns retries off.
	Backoff Backoff

	// MaxDelayed caps the delayed set of a shard and MaxPerRecipient a recipient's jobs in it;
	// past a cap a retry goes to dead with the cap named. Defaults 1,000,000 and 1,000; a
	// negative value means no cap.
	MaxDelayed      int64
	MaxPerRecipient int64

	VisibilityTimeout time.Duration // idle time before another consumer may reclaim an entry; default 60 s
	MaxDeliveries     int64         // deliveries of one entry before it is dead-lettered; default 5
	Grace             time.Duration // how long in-flight sends may run on after shutdown begins; default 25 s
	// RecordGrace is how much longer than Grace the outcomes of sends that returned may take
	// to be written, while Redis is slow or gone, before the shutdown gives them up (each one
	// logged at error level: the replica that takes over its entry sends the job again).
	// Default 10 s.
	RecordGrace  time.Duration
	Block        time.Duration // longest blocking read, which bounds shutdown's wait for a reader; default 1 s
	IntakeBatch  int           // intake entries per read; default 100
	PromoteEvery time.Duration // default 250 ms
	ProbeEvery   time.Duration // how often each shard is asked whether it accepts writes; default 1 s
	ReclaimEvery time.Duration // default 5 s
	JanitorEvery time.Duration // default 60 s
	JanitorIdle  time.Duration // a consumer idle this long with nothing pending is removed; default 10 min
	// StartupTimeout bounds Run's start: the consumer groups, the scripts and the first
	// heartbeat. Redis may still be starting along with the pod, so failures are retried
	// until then; past it Run returns an error, so that the process exits and its restarts
	// show. Default 2 min.
	StartupTimeout time.Duration

	Logger *slog.Logger // default slog.Default()
	// Version is this build's version, published with the heartbeat (for `status`).
	Version string

	// OnBreakerChange, when set, is told every state change of a provider's ratio breaker
	// (for metrics and tests). It runs under the breaker's lock: it must only count or hand the
	// change on, and return.
	OnBreakerChange func(provider string, from, to limits.State)
	// OnAttempt, when set, is told the outcome of every send, and of every delivery the host
	// breaker refused (CIRCUIT_OPEN), as it happens: retried attempts included, which the
	// ledger never shows (for metrics and the demo's live table). It runs on the send's
	// goroutine: it must only count or hand the event on, and return.
	OnAttempt func(Attempt)
}

// Attempt is one delivery attempt's outcome, as Config.OnAttempt is told it.
type Attempt struct {
	Provider string
	JobID    string
	Attempt  int // 0 for the first delivery
	Code     taxonomy.Code
	Status   int // HTTP status; 0 when there was no answer
	// Enqueued is the job's enqueued_at (the time intake first read it, when the job gave
	// none); At is when the answer came. At - Enqueued is the job's time from enqueue to answer.
	Enqueued, At time.Time
}

// withDefaults checks the required fields and fills every zero field with its default.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Store == nil:
		return c, errors.New("dispatch: Config.Store is required")
	case c.Store.Consumer() == "":
		// It names this process in the consumer groups and in the replicas' heartbeats.
		return c, errors.New("dispatch: Config.Store needs a consumer name (stream.Options.Consumer)")
	case c.Sender == nil:
		return c, errors.New("dispatch: Config.Sender is required")
	case c.Registry == nil:
		return c, errors.New("dispatch: Config.Registry is required")
	case len(c.Keys) == 0:
		return c, errors.New("dispatch: Config.Keys needs at least one VAPID key")
	}
	for name, k := range c.Keys {
		if k == nil {
			return c, errors.New("dispatch: Config.Keys[" + name + "] is nil")
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	setDefault(&c.Backoff.Base, 5*time.Second)
	setDefault(&c.Backoff.Cap, 10*time.Minute)
	switch {
	case c.Backoff.MaxRetries == 0:
		c.Backoff.MaxRetries = 8
	case c.Backoff.MaxRetries < 0:
		c.Backoff.MaxRetries = 0 // retries off: a retryable outcome goes straight to dead
	}
	if c.MaxDelayed == 0 {
		c.MaxDelayed = 1_000_000
	}
	if c.MaxPerRecipient == 0 {
		c.MaxPerRecipient = 1_000
	}
	setDefault(&c.VisibilityTimeout, 60*time.Second)
	setDefault(&c.MaxDeliveries, 5)
	setDefault(&c.Grace, 25*time.Second)
	setDefault(&c.RecordGrace, 10*time.Second)
	setDefault(&c.ProbeEvery, time.Second)
	setDefault(&c.Block, time.Second)
	setDefault(&c.IntakeBatch, 100)
	setDefault(&c.PromoteEvery, 250*time.Millisecond)
	setDefault(&c.ReclaimEvery, 5*time.Second)
	setDefault(&c.JanitorEvery, 60*time.Second)
	setDefault(&c.JanitorIdle, 10*time.Minute)
	setDefault(&c.StartupTimeout, 2*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Backoff.Cap < c.Backoff.Base {
		c.Backoff.Cap = c.Backoff.Base
	}
	return c, nil
}

// setDefault sets *p to def when *p is the zero value (or negative, for numbers).
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
		return
	}
	switch v := any(p).(type) {
	case *time.Duration:
		if *v < 0 {
			*p = def
		}
	case *int:
		if *v < 0 {
			*p = def
		}
	case *int64:
		if *v < 0 {
			*p = def
		}
	}
}

// Run is the worker: it creates the consumer groups, starts every loop, and on ctx's
// cancellation shuts them down in this order:
//
//  1. The readers stop: intake loops, lane readers and the reclaimer (a claim is a read too,
//     and what it claims would have to be sent). A blocking read returns within Block.
//     An intake batch already read is still moved to its lanes (quick writes, no sends; after
//     the stop a failed move is not retried). Lane entries read but not yet started (waiting
//     for an in-flight slot) stay pending for another replica to reclaim.
//  2. Sends already in flight run on for up to Grace and record their outcomes. Their context
//     is cancelled only when Grace ends; an entry whose send is cut short before any answer
//     stays pending for another replica. A send that has returned (accepted, or answered)
//     still writes its outcome, for up to RecordGrace past Grace while Redis is slow or gone,
//     so that an accepted push keeps its sent mark and is not sent again; an outcome that is
//     still not written then is logged at error level, job by job.
//  3. The promoter, the janitor, the prober, the heartbeat and the budget loop stop. The
//     first two keep working during the grace period because they serve the whole fleet, not
//     only this process's entries; the heartbeat keeps counting this replica while it still
//     sends (so that no other replica takes over its entries), and leaves the live set when
//     it stops.
//
// While the process runs, the outcome of a send that was answered is never given up: it is
// retried until Redis takes it, and meanwhile the shard takes no new work (redisHealth).
//
// Run returns nil once everything it started has returned, or when ctx ends before it could
// start. It returns an error, having started nothing, for a bad Config, when Redis refuses
// this worker (a wrong password or user, or an ACL that does not allow a command it needs:
// no retry can cure those) and when the start has not succeeded within StartupTimeout.
//
// At start it also warns about orphan lanes: lanes that hold jobs for a provider the registry
// no longer lists, which nothing reads (see warnOrphanLanes).
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.Logger
	provs := cfg.Registry.Providers()
	ids := make([]string, len(provs))
	for i, p := range provs {
		ids[i] = p.ID
	}
	// Redis may still be starting (a pod and its Redis come up together): keep trying, for
	// up to StartupTimeout in all.
	start, cancelStart := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancelStart()
	if err := startup(start, cfg.StartupTimeout, log, "setup", func(ctx context.Context) error {
		return cfg.Store.Setup(ctx, ids)
	}); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before Redis answered: nothing was started
		}
		return err
	}

	lim := newFleetLimits(&cfg)
	health := newRedisHealth(cfg.Store.Shards(), log, cfg.Now())
	// The first heartbeat and budget round run before any lane reads, so no replica sends at
	// the whole fleet's rate, nor with the wrong caps, while it learns its share.
	hb := newHeartbeat(heartbeatParams{cfg: &cfg, limits: lim, health: health, hb: cfg.Registry.Heartbeat()})
	if err := startup(start, cfg.StartupTimeout, log, "heartbeat", hb.beat); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	warnOrphanLanes(start, &cfg)
	cancelStart()
	var bud *budget
	if b := cfg.Registry.Budget(); b != nil {
		bud = newBudget(budgetParams{cfg: &cfg, limits: lim, budget: *b})
		bud.round(cfg.Now())
	}

	// abort is closed when Grace ends: it cancels whatever sends are still in flight.
	abort := make(chan struct{})
	var (
		readers sync.WaitGroup // intake loops and the reclaimer
		lanes   sync.WaitGroup // lane readers, each of which waits for its own sends
		fleet   sync.WaitGroup // promoter, janitor, heartbeat and budget
	)
	shards := cfg.Store.Shards()
	var (
		intakes  []*intake
		laneList []*lane
		byShard  = make([]map[string]*lane, shards)
	)
	for s := 0; s < shards; s++ {
		intakes = append(intakes, newIntake(intakeParams{cfg: &cfg, shard: s, limits: lim, health: health}))
		byShard[s] = make(map[string]*lane, len(provs))
	}
	for _, p := range provs {
		// The provider's limits are per process, shared by its lanes on every shard: the slots
		// are what this replica's memory and sockets carry, the bucket its share of the rate.
		for s := 0; s < shards; s++ {
			l := newLane(laneParams{cfg: &cfg, store: cfg.Store, shard: s, provider: p.ID, lim: lim.byID[p.ID], hosts: lim.hosts, health: health, abort: abort})
			byShard[s][p.ID] = l
			laneList = append(laneList, l)
		}
	}
	rec := newReclaimer(reclaimerParams{cfg: &cfg, intakes: intakes, lanes: byShard, providers: ids,
		health: health, heartbeat: hb, hb: cfg.Registry.Heartbeat()})
	prom := newPromoter(promoterParams{cfg: &cfg})
	jan := newJanitor(janitorParams{cfg: &cfg, providers: ids})
	probe := newProber(proberParams{cfg: &cfg, health: health})

	for _, in := range intakes {
		in.start(&readers)
	}
	for _, l := range laneList {
		l.start(&lanes)
	}
	rec.start(&readers)
	prom.start(&fleet)
	jan.start(&fleet)
	probe.start(&fleet)
	hb.start(&fleet)
	if bud != nil {
		bud.start(&fleet)
	}
	log.Info("dispatch: running", "shards", shards, "providers", len(ids))

	<-ctx.Done()
	// The grace period counts from the cancellation: sends keep running while readers stop.
	grace := time.NewTimer(cfg.Grace)
	defer grace.Stop()

	// 1. Stop reading.
	for _, in := range intakes {
		in.shutdown()
	}
	rec.shutdown()
	for _, l := range laneList {
		l.shutdown()
	}
	readers.Wait()
	// 2. Let in-flight sends finish within Grace, then cancel the rest.
	sendsDone := make(chan struct{})
	go func() { // owned by Run, which receives from sendsDone on both paths below
		lanes.Wait()
		close(sendsDone)
	}()
	select {
	case <-sendsDone:
	case <-grace.C:
		log.Warn("dispatch: grace period over; cancelling sends still in flight", "grace", cfg.Grace)
		close(abort)
		<-sendsDone
	}
	// 3. Stop the fleet-wide loops. The heartbeat leaves the live set as it stops, after the
	// last send, so the other replicas take this one's share of the rates from then on.
	prom.shutdown()
	jan.shutdown()
	probe.shutdown()
	hb.shutdown()
	if bud != nil {
		bud.shutdown()
	}
	fleet.Wait()
	log.Info("dispatch: stopped")
	return nil
}
