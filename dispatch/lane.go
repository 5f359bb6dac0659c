package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// gatherWait is how long a lane whose slots are nearly all taken waits for a few more to come
// back before it reads. Under a backlog the slots are the limit and free one send at a time:
// reading each as it frees costs a round trip (and a wake-up) per job, and a few gathered
// share one (BENCHMARKS.md has the figures). A lane with room reads at once, so this never
// delays a job when the provider keeps up.
const gatherWait = time.Millisecond

// gatherMin is how many free slots a busy lane waits (gatherWait at most) to gather.
func gatherMin(capacity int) int { return min(8, capacity/4) }

// tokenGather is how long the lane may wait before it reads, because the provider's token
// bucket is the limit: half of the time the entries already started take to get their tokens
// (an entry read now would wait behind them), at most Config.LaneGather, and nothing when that
// is under gatherWait (the wait would save little) or the gather is off.
func (l *lane) tokenGather() time.Duration {
	if l.cfg.LaneGather <= 0 {
		return 0
	}
	wait := min(l.lim.tokenQueue()/2, l.cfg.LaneGather)
	if wait < gatherWait {
		return 0
	}
	return wait
}

// halfOpenPace is the longest a half-open lane waits between reads of one entry: the breaker
// lets only a few probes through, and reading more would only put entries back.
const halfOpenPace = 100 * time.Millisecond

// laneParams configure the consumer of one (shard, provider) lane.
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
	// campaigns are the campaigns' states its campaign jobs are checked against; nil when
	// the store holds none.
	campaigns *campaignFeeder
}

// lane reads a provider's lane stream on one shard, never more entries than the provider has
// free in-flight slots (nor more than its token bucket lets go within readAhead), and sends
// each entry in its own goroutine holding one slot. A stalled provider fills its slots and its
// lanes stop reading; a failing one opens its breaker and its lanes stop reading: either way
// its jobs wait in Redis, and the other providers' lanes are untouched.
type lane struct {
	laneParams
	stopper
	// offered carries entries the reclaimer claimed for this lane to the reader, which starts
	// them like the ones it reads. Buffered to the provider's largest in-flight cap; the
	// reclaimer never offers more than there is room for (reclaimer.room).
	offered chan claimed
	// inflight counts the sends started; the reader goroutine waits for it before it returns.
	inflight sync.WaitGroup
	// workers run the sends; they end once the lane is told to stop.
	workers *workers

	mu sync.Mutex
	// held are the entries this lane has read or been offered and not finished, by id, each
	// with a moment no later than Redis last reset its idle time (the start of its read or
	// claim, or of the reclaimer's refresh: refreshed). The reclaimer resets the idle time of those held long before it claims
	// (Store.Reclaim's held), so an entry of ours waiting here (for a slot, a token, or a slow
	// send) is never claimed again and counted as a delivery. An entry of ours claimed all the
	// same (read just as a claim began) is taken as handed over; one claimed just as the
	// goroutine that held it finished it is offered once that goroutine lets go: its delivery
	// checks that a reclaimed entry is still ours before it sends it (delivery.stillOurs).
	// Guarded by mu.
	held map[heldKey]time.Time
	// recheckAfter is how long an entry may wait in this process (for a slot, for a token)
	// before its delivery asks Redis whether it is still ours: half the visibility timeout, after
	// which another replica may reclaim it. Immutable after newLane.
	recheckAfter time.Duration
	// park holds the entries that wait for their recipient's place or the unproven pool's
	// (parking.go); meanHold is the mean time a delivery holds its slot, in ns.
	park     parking
	meanHold atomic.Int64
	// putBackWriters counts the workers writing an overflowing entry's put-back (parkOrSendBack).
	putBackWriters atomic.Int64
	// bulkIdleUntil is when the reader next looks at the bulk lane after it found nothing new
	// there (bulkIdleRecheck), and bulkEmpty whether that read found nothing at all. Owned by
	// the reader goroutine.
	bulkIdleUntil time.Time
	bulkEmpty     bool
}

// claimed is an entry the reclaimer claimed for the lane, and when the claim call began.
type claimed struct {
	e  stream.Entry
	at time.Time
}

// heldKey names an entry the lane holds: entry ids are unique within a stream only, and the
// lane reads two (one per class).
type heldKey struct{ stream, id string }

func newLane(p laneParams) *lane {
	l := &lane{laneParams: p, stopper: newStopper(), offered: make(chan claimed, max(1, p.lim.provider().MaxInFlight)),
		held: make(map[heldKey]time.Time), recheckAfter: p.cfg.VisibilityTimeout / 2}
	l.workers = newWorkers(l.done)
	return l
}

// start runs the reader in a goroutine counted in wg. That goroutine returns only after every
// send it started has returned, so wg also covers the sends.
func (l *lane) start(wg *sync.WaitGroup) {
	goCounted(wg, l.readLoop)
}

// offer hands a reclaimed entry to the reader; false when there is no room, in which case
// the entry stays pending and a later reclaim round takes it. An entry this lane already holds
// is taken as handed over: the goroutine that has it finishes it.
func (l *lane) offer(e stream.Entry, claimedAt time.Time) bool {
	if !l.hold(e, claimedAt) {
		return true
	}
	select {
	case l.offered <- claimed{e, claimedAt}:
		return true
	default:
		l.release(e)
		return false
	}
}

// hold marks an entry as in this lane's hands since at, a moment no later than the one Redis
// last reset its idle time (the start of the read or claim that brought it); false when it
// already was held. An earlier at only makes the reclaimer refresh the entry sooner.
func (l *lane) hold(e stream.Entry, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := heldKey{e.Stream, e.ID}
	if _, ok := l.held[k]; ok {
		return false
	}
	l.held[k] = at
	return true
}

// heldSince are the entries of stream (one of the lane's two) this lane has held since before
// cutoff without a refresh of their idle time (real time, as Redis keeps it): the reclaimer
// passes them to Store.Reclaim, which resets their idle time, and marks them refreshed once
// it has.
func (l *lane) heldSince(stream string, cutoff time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for k, at := range l.held {
		if k.stream == stream && at.Before(cutoff) {
			ids = append(ids, k.id)
		}
	}
	return ids
}

// refreshed marks the entries ids of stream that the lane still holds as having had their idle
// time reset at at: a moment no later than the Reclaim call that reset it began. Only a call
// that succeeded marks them: after a failed one Redis's idle time still runs from the last
// reset, and the next round must pass them again before it is old enough to be claimed.
func (l *lane) refreshed(stream string, ids []string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		k := heldKey{stream, id}
		if _, ok := l.held[k]; ok {
			l.held[k] = at
		}
	}
}

func (l *lane) release(e stream.Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, heldKey{e.Stream, e.ID})
}

// readLoop is the reader. Each round it decides how much to read from the provider's limits:
//
//   - breaker open: nothing. It sleeps until the cooldown ends (at most Block, so a stop is
//     seen), and the jobs wait in Redis with no attempt spent;
//   - breaker half-open: one entry per halfOpenPace, since only the probes may go;
//   - otherwise: the free slots, but no more than readAhead's worth of tokens.
func (l *lane) readLoop() {
	ctx, cancel := untilClosed(l.done)
	defer cancel()
	sendCtx, cancelSends := untilClosed(l.abort)
	defer func() {
		l.inflight.Wait()
		l.dropParked()
		cancelSends()
		l.workers.wait() // done is closed: readLoop returns only once the lane is told to stop
	}()
	cfg, log := l.cfg, l.cfg.Logger
	var backoff redisBackoff
	last := limits.Closed
	gathered := false // this round already waited gatherWait
	for ctx.Err() == nil {
		// No new work while the shard cannot record what happens to it (see redisHealth). The
		// reclaimer offers nothing then either.
		if !l.health.waitOpen(ctx, l.shard, cfg.Block) {
			return
		}
		// Reclaimed entries first: they have waited a visibility timeout already.
		if !l.startOffered(ctx, sendCtx) {
			return
		}
		l.sweepParked(ctx, sendCtx)
		provState := l.lim.breaker().State()
		if provState != last {
			// Every lane of the provider sees the change; the first shard's lane logs it.
			if l.shard == 0 {
				l.logBreakerChange(ctx, last, provState)
			}
			last = provState
		}
		// The proxy's breaker gates the lane as the provider's does; its changes are the
		// proxy's, logged by the metrics rather than by every lane behind it.
		state, openFor := l.lim.gate()
		// n transactional entries, nb bulk ones, most in all (readClasses).
		n, nb, most, past := 0, 0, 0, 0
		owed := l.lim.mix.bulkOwed(time.Now(), l.lim.provider().BulkMinShare)
		if l.lim.paused.Load() {
			// An operator paused the provider: its jobs wait in Redis, spending nothing.
			sleep(ctx, cfg.Block)
			continue
		}
		switch state {
		case limits.Open:
			sleep(ctx, min(openFor, cfg.Block))
			continue
		case limits.HalfOpen:
			// One probe, of either class: a provider with only bulk jobs must close too.
			n = min(1, l.lim.slots.Free())
			nb, most = n, n
		default:
			n, nb = l.lim.readable(), l.lim.bulkReadable(owed)
			if n > 0 {
				past = l.readPastParked()
				n += past
			}
			most = n + nb
			if n > 0 && !gathered {
				if wait := l.tokenGather(); wait > 0 {
					gathered = true
					sleep(ctx, wait)
					continue
				}
				if n < gatherMin(l.lim.slots.Cap()) && l.lim.slots.InFlight() > 0 {
					gathered = true
					sleep(ctx, gatherWait)
					continue
				}
			}
		}
		gathered = false
		if n == 0 && nb == 0 {
			if l.lim.slots.Free() == 0 {
				// Wait for a slot without keeping it, then read as many as are free then.
				if l.lim.slots.Wait(ctx) != nil {
					return
				}
			} else {
				// Slots are free but enough entries already wait for tokens.
				sleep(ctx, l.lim.paceWait(cfg.Block))
			}
			continue
		}
		// Taken before the read: Redis starts an entry's idle time when it hands it over, so
		// no later than this (see hold).
		readAt := time.Now()
		entries, err := l.readClasses(ctx, n, nb, most, past, owed)
		if err == nil && len(entries) == 0 && most > 0 {
			entries, err = l.waitNew(ctx, n, nb)
		}
		if ctx.Err() == nil {
			l.health.observe(l.shard, telemetry.OpRead, err, cfg.Now())
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("dispatch: lane read failed; retrying", "shard", l.shard, "provider", l.provider, "err", err)
			backoff.wait(ctx, nil)
			continue
		}
		backoff.reset()
		// The whole read is held before any of it starts: starting one may wait for a slot
		// (the provider's slots are shared by its lanes on every shard), and an entry read but
		// not yet held meanwhile would look to the reclaimer like one this worker lost track
		// of, to be claimed again, counted as a delivery, and started a second time.
		mine := entries[:0]
		for _, e := range entries {
			// An entry already held was claimed and offered before this read's answer came
			// (it came later than the visibility timeout): the offer's delivery has it.
			if l.hold(e, readAt) {
				mine = append(mine, e)
			}
		}
		entries = mine
		for i, e := range entries {
			if !l.startDelivery(ctx, sendCtx, e, false, readAt) {
				// Stopping: the rest were never started and stay pending, for another replica
				// once this one has left; none of them is refreshed meanwhile.
				for _, rest := range entries[i:] {
					l.release(rest)
				}
				return
			}
		}
		if state == limits.HalfOpen && len(entries) > 0 {
			sleep(ctx, min(halfOpenPace, cfg.Block))
		}
	}
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

// startOffered starts the delivery of every entry the reclaimer offered so far; false when the
// lane is told to stop meanwhile.
func (l *lane) startOffered(ctx, sendCtx context.Context) bool {
	for {
		select {
		case c := <-l.offered:
			if !l.startDelivery(ctx, sendCtx, c.e, true, c.at) {
				l.release(c.e) // stopping: never started, it stays pending
				return false
			}
		default:
			return true
		}
	}
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
