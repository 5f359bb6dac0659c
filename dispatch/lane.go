package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// halfOpenPace is the longest a half-open lane waits between reads of one entry: the breaker
// lets only a few probes through, and reading more would only put entries back.
const halfOpenPace = 100 * time.Millisecond

// maxRead bounds the entries of one read: one script's reply, and its work in Redis.
const maxRead = 256

// slotGather is how long a lane whose slots are nearly all taken waits, once, for a few more to
// come back before it reads: under a backlog the slots free one send at a time, and reading
// each as it frees costs a round trip per job where a few gathered share one.
const slotGather = time.Millisecond

// heldBackRecheck is the shortest wait of a lane whose bulk entries its reserves held back
// (the slots transactional jobs keep are all that is free): a send ending frees one, and no
// signal of that reaches the wait.
const heldBackRecheck = 5 * time.Millisecond

// gatherMin is how many free slots a busy lane waits (slotGather at most) to gather.
func gatherMin(capacity int) int { return min(8, capacity/4) }

// laneParams configure the reader of one (shard, provider) lane.
type laneParams struct {
	cfg      *Config // shared, read-only after Run applied the defaults
	store    laneStore
	shard    int
	provider string
	// lim are the provider's limits, shared by its lanes on every shard.
	lim *providerLimits
	// hosts is the breaker of unknown hosts, shared by every lane.
	hosts *limits.HostBreaker
	// health is the worker's view of Redis: the lane reads nothing while its shard's gate is
	// closed, and its writes report to it.
	health *redisHealth
	// abort is closed when the grace period ends; it cancels the sends still in flight.
	abort <-chan struct{}
	// campaigns are the campaigns its campaign recipients are checked against and whose
	// messages they carry; nil when the store holds none.
	campaigns *campaignFeeder
	// inHand are the entries this process works on, which the reclaimer spares.
	inHand *inHand
}

// lane reads a provider's two lanes (transactional and bulk) on one shard. It takes the slots
// and the tokens first and then reads only what it can start with them, so what waits for the
// provider waits in Redis, never in the worker: a stalled provider fills its slots and its lanes
// stop reading; a failing one opens its breaker and its lanes stop reading; a slow rate leaves
// its jobs in Redis until their tokens come. The other providers' lanes are untouched. Each
// entry read starts its turn at once (turn.go), on a goroutine that holds its slot.
type lane struct {
	laneParams
	stopper
	// inflight counts the turns started; the reader goroutine waits for them before it returns.
	inflight sync.WaitGroup
	// workers run the turns; they end once the lane is told to stop.
	workers *workers

	// backlog says the last read took all it asked for: more waits, and the next read may
	// gather a few tokens or slots first so that it takes several entries in one call; the
	// records of the sends meanwhile may wait for others (turn.send). Written by the reader.
	backlog atomic.Bool
}

func newLane(p laneParams) *lane {
	l := &lane{laneParams: p, stopper: newStopper()}
	l.workers = newWorkers(l.done)
	return l
}

// start runs the reader in a goroutine counted in wg. That goroutine returns only after every
// turn it started has returned, so wg also covers the sends.
func (l *lane) start(wg *sync.WaitGroup) {
	goCounted(wg, l.readLoop)
}

// readLoop is the reader. Each round it asks the provider's limits how much it may read:
//
//   - paused by an operator, or breaker open: nothing; the jobs wait in Redis, no attempt spent;
//   - breaker half-open: one entry per halfOpenPace, since only the probes may go;
//   - otherwise: as many entries as it takes free slots and tokens for (the classes' shares
//     decide how many of each, classes.go).
//
// It reads those (one script for both lanes), gives back the slots and tokens the read did not
// use, and starts every entry it read. When the lanes are drained it waits for the next entry
// holding nothing (WaitLanes), for at most Block so that a stop is seen.
func (l *lane) readLoop() {
	ctx, cancel := untilClosed(l.done)
	defer cancel()
	sendCtx, cancelSends := untilClosed(l.abort)
	defer func() {
		l.inflight.Wait()
		cancelSends()
		l.workers.wait() // done is closed: readLoop returns only once the lane is told to stop
	}()
	cfg, log := l.cfg, l.cfg.Logger
	var backoff redisBackoff
	last := limits.Closed
	gathered := false // this round already waited for more slots or tokens
	for ctx.Err() == nil {
		// No new work while the shard cannot record what happens to it (see redisHealth).
		if !l.health.waitOpen(ctx, l.shard, cfg.Block) {
			return
		}
		if s := l.lim.breaker().State(); s != last {
			// Every lane of the provider sees the change; the first shard's lane logs it.
			if l.shard == 0 {
				l.logBreakerChange(ctx, last, s)
			}
			last = s
		}
		if proxy := cfg.proxyOf(l.provider); proxy != "" {
			l.lim.fleet.proxies.logChange(ctx, log, proxy)
		}
		want, wait := l.gate()
		if want == 0 {
			sleep(ctx, wait)
			continue
		}
		if l.lim.slots.Free() == 0 {
			if l.lim.slots.Wait(ctx) != nil {
				return
			}
			continue
		}
		if !gathered && l.backlog.Load() {
			if wait := l.gatherWait(want); wait > 0 {
				gathered = true
				sleep(ctx, wait)
				continue
			}
		}
		gathered = false
		k := l.lim.slots.Take(want)
		if k == 0 {
			continue // another shard's lane took the free slots first
		}
		now := time.Now()
		read := l.lim.grant(now, k)
		if read.Total == 0 {
			// Slots are free, tokens are not: reserve the next token and wait for it holding
			// no slot, then read one entry with it.
			l.lim.slots.Put(k)
			if !l.lim.reserveToken(ctx, now) {
				continue
			}
			if k = l.lim.slots.Take(1); k == 0 {
				l.lim.tokens.Return(time.Now(), 1)
				continue
			}
			now = time.Now()
			read = l.lim.grantReserved(now)
		}
		entries, drained, err := l.store.ReadLanes(ctx, l.shard, l.provider, read)
		if ctx.Err() == nil {
			l.health.observe(l.shard, telemetry.OpRead, err, cfg.Now())
		}
		l.lim.slots.Put(k - len(entries))
		l.lim.tokens.Return(time.Now(), read.Total-len(entries))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("dispatch: lane read failed; retrying", "shard", l.shard, "provider", l.provider, "err", err)
			backoff.wait(ctx, nil)
			continue
		}
		backoff.reset()
		l.backlog.Store(len(entries) == read.Total)
		l.lim.mix.read(now, entries)
		// Every entry read starts now, holding the slot and the token it was read with: none
		// waits in this process for either.
		for _, e := range entries {
			l.begin(ctx, sendCtx, e)
		}
		switch {
		case drained != nil:
			// Nothing was read. When bulk entries were not asked for (their reserves held them
			// back), the bulk lane may hold some: wait only for a transactional entry, and no
			// longer than until bulk may go.
			block, bulk := cfg.Block, read.BulkMax > 0
			if !bulk {
				block = min(block, max(l.lim.tokens.Until(time.Now(), bulkKeep(l.lim)+1), heldBackRecheck))
			}
			if _, err := l.store.WaitLanes(ctx, l.shard, l.provider, *drained, bulk, block); err != nil && ctx.Err() == nil {
				log.Warn("dispatch: lane wait failed; retrying", "shard", l.shard, "provider", l.provider, "err", err)
				backoff.wait(ctx, nil)
			}
		case want == 1 && l.lim.breaker().State() == limits.HalfOpen:
			sleep(ctx, min(halfOpenPace, cfg.Block))
		}
	}
}

// gate is how many entries the lane may read now (0 with how long to wait before it looks
// again): none while an operator has paused the provider or its breaker (or its proxy's) is
// open, one while it is half-open, else its free slots, at most maxRead.
func (l *lane) gate() (want int, wait time.Duration) {
	if l.lim.paused.Load() {
		return 0, l.cfg.Block
	}
	switch state, openFor := l.lim.gate(); state {
	case limits.Open:
		return 0, min(openFor, l.cfg.Block)
	case limits.HalfOpen:
		return 1, 0
	}
	return min(max(l.lim.slots.Free(), 1), maxRead), 0
}

// gatherWait is how long a lane that found a backlog at its last read waits before it reads
// again, so that the read takes several entries in one call: while its provider's tokens are
// the limit, until they reach what LaneGather's time earns (at most LaneGather, and short of
// the burst); while its slots are, slotGather once for a few more to free. Nothing when the wait
// would save little.
func (l *lane) gatherWait(want int) time.Duration {
	cfg := l.cfg
	if cfg.LaneGather <= 0 {
		return 0
	}
	if r := l.lim.tokens.Rate(); !math.IsInf(r, 1) {
		// Short of a full bucket, whose cap would lose what the rate earns while the lane
		// wakes late; one token is no gather (the lane reserves it instead).
		g := min(want, l.lim.tokens.Burst()-1, int(r*cfg.LaneGather.Seconds()))
		if g <= 1 {
			return 0
		}
		if wait := min(l.lim.tokens.Until(time.Now(), g), cfg.LaneGather); wait > 0 {
			return wait
		}
	}
	if free := l.lim.slots.Free(); free < gatherMin(l.lim.slots.Cap()) && l.lim.slots.InFlight() > 0 {
		return slotGather
	}
	return 0
}

// logBreakerChange logs the provider's breaker going from was to now, with why when it opened.
// It is logged by a lane rather than in the breaker's hook, which runs under its lock.
func (l *lane) logBreakerChange(ctx context.Context, was, now limits.State) {
	level, attrs := slog.LevelInfo, []any{"provider", l.provider, "was", was.String()}
	if now == limits.Open {
		// Why: the failures (5xx, 429, transport errors) of at least min_samples outcomes in
		// the window reached the failure ratio.
		b := l.lim.provider().Breaker
		failures, outcomes := l.lim.breaker().Tripped()
		level = slog.LevelWarn
		attrs = append(attrs, "why", fmt.Sprintf("%d failures in %d outcomes within %s reached the failure ratio %g (at least %d outcomes)",
			failures, outcomes, b.Window, b.FailureRatio, b.MinSamples),
			"failures", failures, "outcomes", outcomes, "cooldown", b.Cooldown.String())
	}
	l.cfg.Logger.Log(ctx, level, "dispatch: provider breaker "+now.String(), attrs...)
}

// sleep waits d or until ctx ends. It paces a reader; it never waits for an outcome.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
