package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// reclaimBatch is how many entries one Requeue call hands back, and reclaimRounds how many
// calls a stream gets in one round; the next round goes on.
const (
	reclaimBatch  = 100
	reclaimRounds = 10
)

// reclaimerParams configure the reclaimer.
type reclaimerParams struct {
	cfg       *Config // shared, read-only after Run applied the defaults
	lanes     *laneTable
	health    *redisHealth
	heartbeat *heartbeat
	hb        providers.HeartbeatConfig
	// inHand are the entries this process works on: its own other idle entries are lost.
	inHand *inHand
}

// reclaimer hands back to their streams the entries that another consumer read and then left
// pending for longer than the visibility timeout, and that no live replica owns: their owner
// died, or stopped before it could hand them back itself; and this consumer's own idle entries
// that it does not have in hand, read by a call whose reply never reached it. (An entry of a live replica is that
// replica's however long it idles: its send may be slow, or it may have been cut off from
// Redis and be writing its outcome now; taking it would send the job twice.) Stream's Requeue
// writes each again at its stream's end, where the next read of any lane takes it with a slot
// and a token like any other; an entry delivered MaxDeliveries times goes to dead in the same
// script instead, so a job that kills every worker that reads it cannot go round forever.
//
// Which replicas are alive is the last heartbeat's list. It is trusted only once Redis has
// answered this process without a break for StaleAfter plus one heartbeat period (see
// allowed): after an outage every replica's last beat is old, and each needs a beat of its own
// before its entries can be told from a dead replica's.
type reclaimer struct {
	reclaimerParams
	stopper
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

// reclaim runs one round over every shard's intakes and every provider's lanes.
func (r *reclaimer) reclaim(ctx context.Context) error {
	cfg := r.cfg
	alive, ok := r.allowed(cfg.Now())
	if !ok {
		return nil
	}
	for s := 0; s < cfg.Store.Shards(); s++ {
		if !r.health.open(s) {
			continue // the shard takes no new work now; its idle entries wait
		}
		for _, st := range groupStreams(cfg.Store.Keys(s), r.lanes.providers()) {
			// The entries of replicas that are gone, then this one's own that it lost track
			// of: read by a call whose reply never came back (Redis went away meanwhile).
			gone := stream.Requeue{MinIdle: cfg.VisibilityTimeout, Count: reclaimBatch, MaxDeliveries: cfg.MaxDeliveries, Alive: alive}
			lost := stream.Requeue{MinIdle: cfg.VisibilityTimeout, Count: reclaimBatch, MaxDeliveries: cfg.MaxDeliveries,
				Only: cfg.Store.Consumer(), Except: r.inHand.of(st)}
			for _, req := range []stream.Requeue{gone, lost} {
				for range reclaimRounds {
					n, err := requeue(ctx, cfg, r.health, s, st, req)
					if err != nil {
						return err
					}
					if n < reclaimBatch {
						break
					}
				}
			}
		}
	}
	return nil
}

// handBackOwn hands back every entry still pending under this worker's own name on every
// stream: at its start it holds none, so those are what an earlier process of the same name
// left when it died. Without this they would wait until that name's heartbeat had gone stale
// and the visibility timeout had passed.
func handBackOwn(ctx context.Context, cfg *Config, health *redisHealth, providers []string) error {
	for s := 0; s < cfg.Store.Shards(); s++ {
		for _, st := range groupStreams(cfg.Store.Keys(s), providers) {
			req := stream.Requeue{Count: reclaimBatch, MaxDeliveries: cfg.MaxDeliveries, Only: cfg.Store.Consumer()}
			for {
				n, err := requeue(ctx, cfg, health, s, st, req)
				if err != nil {
					return err
				}
				if n < reclaimBatch {
					break
				}
			}
		}
	}
	return nil
}

// requeue runs one Requeue call and says what it did; n counts the entries it handed back or
// dead-lettered.
func requeue(ctx context.Context, cfg *Config, health *redisHealth, shard int, st string, req stream.Requeue) (n int, err error) {
	got, err := cfg.Store.Requeue(ctx, shard, st, req)
	if health != nil {
		health.observe(shard, telemetry.OpReclaim, err, cfg.Now())
	}
	if err != nil {
		return 0, err
	}
	if got.TooManyDeliveries > 0 {
		cfg.Logger.Warn("dispatch: entries delivered too many times dead-lettered", "stream", st, "count", got.TooManyDeliveries)
		for range got.TooManyDeliveries {
			cfg.Metrics.DeadLetter(telemetry.DeadTooManyDeliveries)
		}
	}
	if got.Invalid > 0 {
		cfg.Logger.Info("dispatch: handed-back intake entries that break the entry rules dead-lettered", "stream", st, "count", got.Invalid)
		for range got.Invalid {
			cfg.Metrics.DeadLetter(telemetry.DeadInvalidJob)
		}
	}
	if got.Entries > 0 {
		cfg.Logger.Info("dispatch: entries handed back for another read", "stream", st, "count", got.Entries)
	}
	return got.Entries + got.TooManyDeliveries + got.Invalid, nil
}

// groupStreams are the streams of shard k that the group reads: both intakes and both lanes of
// every provider.
func groupStreams(k stream.Keys, providers []string) []string {
	out := k.Intakes()
	for _, p := range providers {
		out = append(out, k.Lane(p), k.BulkLane(p))
	}
	return out
}
