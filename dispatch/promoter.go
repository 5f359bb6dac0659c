package dispatch

import (
	"context"

	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// promoteLimit is how many due retries one PromoteDue call moves: enough to drain a backlog in
// a few calls, small enough that one script never holds Redis for long.
const promoteLimit = 500

// promoteRounds bounds the calls per shard per tick, so a huge backlog on one shard does not
// keep the others waiting; the next tick continues.
const promoteRounds = 20

// promoter moves due members of every shard's delayed set back to their lanes, every
// PromoteEvery. Due is decided by cfg.Now, so tests step a clock. The move is one atomic
// script, so every replica runs a promoter and none needs to be elected.
// Run ticks promote at start and then every PromoteEvery.
type promoter struct {
	cfg *Config // shared, read-only after Run applied the defaults
}

// promote runs one round over every shard.
func (pr *promoter) promote(ctx context.Context) error {
	cfg := pr.cfg
	for s := 0; s < cfg.Store.Shards(); s++ {
		for range promoteRounds {
			n, err := cfg.Store.PromoteDue(ctx, s, cfg.Now(), promoteLimit)
			if err != nil {
				if ctx.Err() == nil {
					cfg.Metrics.RedisError(telemetry.OpPromote)
				}
				return err
			}
			if n > 0 {
				cfg.Logger.Debug("dispatch: retries promoted", "shard", s, "count", n)
			}
			if n < promoteLimit {
				break
			}
		}
	}
	return nil
}
