package dispatch

import (
	"context"
	"sync"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// reclaimRounds bounds the intake reclaim calls per shard per tick; the next tick continues.
const reclaimRounds = 10

// reclaimerParams configure the reclaimer.
type reclaimerParams struct {
	cfg       *Config   // shared, read-only after Run applied the defaults
	intakes   []*intake // by shard
	lanes     *laneTable
	health    *redisHealth
	heartbeat *heartbeat
	hb        providers.HeartbeatConfig
}

// reclaimer takes over entries that another consumer read and then left idle for longer than
// the visibility timeout, and that no live replica owns: their owner died or stopped. (An
// entry of a live replica is that replica's however long it idles: its send may be slow, or it
// may have been cut off from Redis and be writing its outcome now; taking it would send the job
// twice.) Entries this replica holds itself are not claimed either: before each claim of a
// lane, the entries its lane has held for half the visibility timeout have their idle time
// reset in the same script (lane.heldSince), with no delivery counted. Stream's Reclaim moves them to this consumer; entries delivered more than
// MaxDeliveries times go to dead in the same script, so a job that kills every worker that
// reads it cannot go round forever.
//
// Which replicas are alive is the last heartbeat's list. It is trusted only once Redis has
// answered this process without a break for StaleAfter plus one heartbeat period (see
// allowed): after an outage every replica's last beat is old, and each needs a beat of its own
// before its entries can be told from a dead replica's.
//
// A claimed entry is handled exactly like a fresh one: an intake entry through the intake's
// handling, here; a lane entry through its lane, which starts it when it has a free in-flight
// slot. The reclaimer never claims more lane entries, over all shards, than the provider has
// free slots, so reclaimed work respects the same budget as read work.
type reclaimer struct {
	reclaimerParams
	stopper
	// turn counts the rounds, to rotate the shard whose lanes claim first; owned by the
	// loop's goroutine.
	turn int
}

func newReclaimer(p reclaimerParams) *reclaimer {
	return &reclaimer{reclaimerParams: p, stopper: newStopper()}
}

// start runs the loop in a goroutine counted in wg; the first round is one period in.
func (r *reclaimer) start(wg *sync.WaitGroup) {
	goCounted(wg, func() { ticking(r.done, r.cfg.ReclaimEvery, false, r.cfg, "reclaimer", r.reclaim) })
}

// allowed reports whether this round may reclaim, and which consumers' entries to spare: none
// until Redis has answered without a break for StaleAfter + Every (every live replica has
// beaten since it came back) and while the last heartbeat is older than StaleAfter (this
// replica does not know who is alive).
func (r *reclaimer) allowed(now time.Time) ([]string, bool) {
	if r.health.upFor(now) < r.hb.StaleAfter+r.hb.Every {
		return nil, false
	}
	v := r.heartbeat.alive()
	if v == nil || now.Sub(v.at) > r.hb.StaleAfter {
		return nil, false
	}
	return v.names, true
}

// reclaim runs one round over every shard's intake and every provider's lanes.
func (r *reclaimer) reclaim(ctx context.Context) error {
	cfg := r.cfg
	alive, ok := r.allowed(cfg.Now())
	if !ok {
		return nil
	}
	shards := cfg.Store.Shards()
	for s := 0; s < shards; s++ {
		if !r.health.open(s) {
			continue // the shard takes no new work now; its idle entries wait
		}
		for range reclaimRounds {
			claimed, err := r.claim(ctx, s, cfg.Store.Keys(s).Intake, cfg.IntakeBatch, nil, alive)
			if err != nil {
				return err
			}
			for _, e := range claimed {
				_ = r.intakes[s].handle(ctx, e) // a failed move leaves e pending for a later round
			}
			if len(claimed) < cfg.IntakeBatch {
				break
			}
		}
	}
	// A provider's slots are shared by its lanes on every shard, so its room is worked out
	// once and spent across them. The shard that goes first turns round by round: when the
	// room is short, each shard's idle entries get their turn.
	first := r.turn % shards
	r.turn++
	for _, p := range r.lanes.providers() {
		room := r.room(p)
		for i := 0; i < shards && room > 0; i++ {
			s := (first + i) % shards
			if !r.health.open(s) {
				continue
			}
			l := r.lanes.of(s, p)
			n := min(room, cap(l.offered)-len(l.offered))
			if n == 0 {
				continue // this lane's reader has not yet started what it was offered
			}
			// The entries the lane has held for half the visibility timeout get their idle time
			// reset in the same script, before it looks for idle ones: they are ours, and in
			// hand. Without a claim round nothing counts their deliveries, so they can wait.
			// Both classes' lanes, transactional first, while there is room.
			for _, class := range jobfmt.Classes {
				if n <= 0 {
					break
				}
				claimed, at, err := r.claimLane(ctx, l, cfg.Store.Keys(s).LaneOf(p, class), n, alive)
				if err != nil {
					return err
				}
				room -= len(claimed)
				n -= len(claimed)
				for _, e := range claimed {
					if !l.offer(e, at) {
						// Only the reclaimer offers, and it claimed no more than the room: this
						// cannot happen, but if it did the entry stays pending for the next round.
						cfg.Logger.Warn("dispatch: lane had no room for a reclaimed entry", "stream", e.Stream, "entry", e.ID)
					}
				}
			}
		}
	}
	return nil
}

// room is how many reclaimed entries provider p can take now, over all its lanes: what a lane
// may read (free in-flight slots, which every shard's lanes share, and no more than about a
// second of tokens: a throttled provider's claimed entries must not idle past the visibility
// timeout waiting for theirs), less the entries already offered to its lanes and not yet
// started, each of which will take one. None while its breaker is open (the entries would only
// be put back) or an operator paused it.
func (r *reclaimer) room(p string) int {
	lim := r.lanes.of(0, p).lim
	if state, _ := lim.gate(); state == limits.Open || lim.paused.Load() {
		return 0
	}
	free := lim.readable()
	for s := range r.lanes.shards() {
		free -= len(r.lanes.of(s, p).offered)
	}
	return max(0, free)
}

// claimLane claims up to n idle entries of st, one of lane l's streams, with the entries l
// has held for half the visibility timeout refreshed first in the same script, and marks those
// refreshed once the script has run. at is when the call began: no later than Redis reset the
// idle time of what it refreshed and claimed.
func (r *reclaimer) claimLane(ctx context.Context, l *lane, st string, n int, alive []string) (claimed []stream.Entry, at time.Time, err error) {
	at = time.Now()
	held := l.heldSince(st, at.Add(-r.cfg.VisibilityTimeout/2))
	claimed, err = r.claim(ctx, l.shard, st, n, held, alive)
	if err != nil {
		return nil, at, err
	}
	l.refreshed(st, held, at)
	return claimed, at, nil
}

func (r *reclaimer) claim(ctx context.Context, shard int, stream string, count int, held, alive []string) ([]stream.Entry, error) {
	cfg := r.cfg
	claimed, dead, err := cfg.Store.Reclaim(ctx, shard, stream, cfg.VisibilityTimeout, count, cfg.MaxDeliveries, held, alive...)
	r.health.observe(shard, telemetry.OpReclaim, err, cfg.Now())
	if err != nil {
		return nil, err
	}
	if dead.TooManyDeliveries > 0 {
		cfg.Logger.Warn("dispatch: entries delivered too many times dead-lettered", "stream", stream, "count", dead.TooManyDeliveries)
	}
	if dead.Invalid > 0 {
		cfg.Logger.Info("dispatch: reclaimed intake entries that break the entry rules dead-lettered", "stream", stream, "count", dead.Invalid)
	}
	for range dead.TooManyDeliveries {
		cfg.Metrics.DeadLetter(telemetry.DeadTooManyDeliveries)
	}
	for range dead.Invalid {
		cfg.Metrics.DeadLetter(telemetry.DeadInvalidJob)
	}
	if len(claimed) > 0 {
		cfg.Logger.Info("dispatch: entries reclaimed", "stream", stream, "count", len(claimed))
	}
	return claimed, nil
}
