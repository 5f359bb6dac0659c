package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// Run is the worker: New and Worker.Run, for callers that reload nothing.
func Run(ctx context.Context, cfg Config) error {
	w, err := New(cfg)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Run creates the consumer groups, starts every loop, applies the registry reloads it is given
// (Reload) while it runs, and on ctx's cancellation shuts the loops down in this order:
//
//  1. The readers stop: intake loops, lane readers and the reclaimer. A blocking read returns
//     within Block. An intake batch already read is still moved to its lanes (quick writes, no
//     sends; after the stop a failed move is not retried). A lane reads only what it can start
//     at once, so nothing it read waits for a slot or a token; a turn that has not sent yet
//     (it waits for a host's or a sender's pause, or for Redis to answer a check) hands its
//     entry back to the delayed set, due at once, for any replica's promoter to write to its
//     lane again.
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
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("dispatch: Worker.Run called twice")
	}
	cfg := &w.cfg
	log := cfg.Logger
	ids := cfg.registry().IDs()
	// Redis may still be starting (a pod and its Redis come up together): keep trying, for
	// up to StartupTimeout in all.
	start, cancelStart := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancelStart()
	if err := startup(start, cfg.StartupTimeout, log, "setup", func(ctx context.Context) error {
		err := cfg.Store.Setup(ctx, ids)
		if err != nil && ctx.Err() == nil {
			cfg.Metrics.RedisError(telemetry.OpSetup)
		}
		return err
	}); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before Redis answered: nothing was started
		}
		return err
	}

	cfg.Health.SetReady("groups", true, "")
	w.limits = newFleetLimits(cfg)
	w.health = newRedisHealth(cfg.Store.Shards(), log, cfg.Now(), cfg.Metrics)
	cfg.Metrics.SetProviderSource(w.limits.gauges)
	cfg.Metrics.SetProviderProxies(cfg.providerProxies())
	cfg.Metrics.SetKeySource(w.limits.keyGauges)
	// The first heartbeat and budget round run before any lane reads, so no replica sends at
	// the whole fleet's rate, nor with the wrong caps, while it learns its share.
	hb := newHeartbeat(heartbeatParams{cfg: cfg, limits: w.limits, health: w.health, hb: cfg.registry().Heartbeat()})
	if err := startup(start, cfg.StartupTimeout, log, "heartbeat", hb.beat); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// What an earlier process of this name left pending goes back to its streams now, not a
	// visibility timeout after its heartbeat went stale.
	if err := startup(start, cfg.StartupTimeout, log, "hand back", func(ctx context.Context) error {
		return handBackOwn(ctx, cfg, nil, ids)
	}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	warnOrphanLanes(start, cfg)
	warnRedisSettings(start, cfg)
	cancelStart()
	var bud *budget
	if b := cfg.registry().Budget(); b != nil {
		bud = newBudget(budgetParams{cfg: cfg, limits: w.limits, every: b.Every})
		bud.round(cfg.Now())
	}

	// abort is closed when Grace ends: it cancels whatever sends are still in flight.
	w.abort = make(chan struct{})
	var (
		readers sync.WaitGroup // intake loops and the reclaimer
		fleet   sync.WaitGroup // promoter, janitor, heartbeat and budget
	)
	shards := cfg.Store.Shards()
	w.campaigns = newCampaignFeeder(cfg, w.limits)
	w.inHand = newInHand()
	var intakes []*intake
	for s := 0; s < shards; s++ {
		for _, class := range jobfmt.Classes {
			intakes = append(intakes, newIntake(intakeParams{cfg: cfg, shard: s, class: class, limits: w.limits,
				health: w.health, campaigns: cfg.Campaigns, inHand: w.inHand}))
		}
	}
	w.lanes = newLaneTable(shards)
	for _, id := range ids {
		w.startLanes(w.limits.get(id))
	}
	rec := newReclaimer(reclaimerParams{cfg: cfg, lanes: w.lanes, inHand: w.inHand,
		health: w.health, heartbeat: hb, hb: cfg.registry().Heartbeat()})
	fleetLoops := []*tickingLoop{
		newTickingLoop(cfg, "promoter", cfg.PromoteEvery, true, (&promoter{cfg: cfg}).promote),
		newTickingLoop(cfg, "janitor", cfg.JanitorEvery, false, (&janitor{cfg: cfg, lanes: w.lanes}).clean),
		newTickingLoop(cfg, "prober", cfg.ProbeEvery, true, (&prober{cfg: cfg, health: w.health}).probe),
		newTickingLoop(cfg, "stats", cfg.StatsEvery, true, (&stats{cfg: cfg, lanes: w.lanes, heartbeat: hb, health: w.health}).round),
	}
	if w.campaigns != nil {
		fleetLoops = append(fleetLoops, newTickingLoop(cfg, "campaigns", cfg.CampaignEvery, true, w.campaigns.round))
	}

	for _, in := range intakes {
		in.start(&readers)
	}
	rec.start(&readers)
	for _, l := range fleetLoops {
		l.start(&fleet)
	}
	hb.start(&fleet)
	if bud != nil {
		bud.start(&fleet)
	}
	log.Info("dispatch: running", "shards", shards, "providers", len(ids))

	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case r := <-w.reloads:
			r.done <- w.apply(ctx, r)
		}
	}
	w.stopping.Store(true)
	cfg.Health.Draining()
	log.Info("dispatch: stopping: the readers stop, the sends in flight finish", "grace", cfg.Grace.String(), "record_grace", cfg.RecordGrace.String())
	// The grace period counts from the cancellation: sends keep running while readers stop.
	grace := time.NewTimer(cfg.Grace)
	defer grace.Stop()

	// 1. Stop reading.
	for _, in := range intakes {
		in.shutdown()
	}
	rec.shutdown()
	for _, l := range w.allLanes() {
		l.shutdown()
	}
	readers.Wait()
	// 2. Let in-flight sends finish within Grace, then cancel the rest.
	sendsDone := make(chan struct{})
	go func() { // owned by Run, which receives from sendsDone on both paths below
		w.laneGroup.Wait()
		close(sendsDone)
	}()
	select {
	case <-sendsDone:
	case <-grace.C:
		log.Warn("dispatch: grace period over; cancelling sends still in flight", "grace", cfg.Grace)
		close(w.abort)
		<-sendsDone
	}
	// 3. Stop the fleet-wide loops. The heartbeat leaves the live set as it stops, after the
	// last send, so the other replicas take this one's share of the rates from then on.
	for _, l := range fleetLoops {
		l.shutdown()
	}
	hb.shutdown()
	if bud != nil {
		bud.shutdown()
	}
	fleet.Wait()
	log.Info("dispatch: stopped")
	return nil
}
