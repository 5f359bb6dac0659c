package dispatch

import (
	"context"
	"sync"
	"time"
)

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
