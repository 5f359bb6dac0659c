package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// startup runs one step of Run's start until it succeeds, logging each failure and backing
// off between tries as redisHealth.retry does: Redis may still be starting along with the pod. It
// gives up at once on a refusal, a shard count that is not the recorded one and a Redis too old,
// which no retry cures, and when ctx ends; Run gives ctx the
// deadline StartupTimeout (limit, named in the error) for all its steps together, so that a
// worker that cannot start exits and its restarts show instead of it waiting for ever.
func startup(ctx context.Context, limit time.Duration, log *slog.Logger, what string, op func(context.Context) error) error {
	var backoff redisBackoff
	for {
		err := op(ctx)
		switch {
		case err == nil:
			return nil
		case stream.Refused(err):
			return fmt.Errorf("dispatch: %s: redis refuses this worker (check the user, password and ACL of the redis URL): %w", what, err)
		case errors.Is(err, stream.ErrShardCount) || errors.Is(err, stream.ErrRedisVersion) || errors.Is(err, stream.ErrBadPrefix):
			return fmt.Errorf("dispatch: %s: %w", what, err)
		case ctx.Err() != nil:
			return fmt.Errorf("dispatch: %s: redis not ready within the startup timeout of %v: %w", what, limit, err)
		}
		log.Warn("dispatch: redis call failed; retrying", "op", what, "err", err, "retry_in", max(backoff.next, redisRetryMin))
		if !backoff.wait(ctx, nil) {
			return fmt.Errorf("dispatch: %s: redis not ready within the startup timeout of %v: %w", what, limit, err)
		}
	}
}

// orphanScanLimit bounds the search for orphan lanes: it walks the keyspace with SCAN, and a
// slow walk must not hold up the start. It is only a warning.
const orphanScanLimit = 30 * time.Second

// warnOrphanLanes logs one warning per orphan lane: the lane of a provider that the registry
// does not list (removed or renamed in registry.yaml), with how many entries it holds and how
// many of them a consumer read and never finished. Nothing reads such a lane, the reclaimer
// does not claim from it, and the promoter keeps moving that provider's due retries into it:
// its jobs wait until an operator re-adds the provider or moves them (docs/operations.md,
// "Retries and where jobs end"). They are not re-routed automatically: a rename and a removal
// look the same from here, and which provider should take the jobs is the operator's call.
// Best effort: a failure to look is logged and the worker starts anyway.
func warnOrphanLanes(ctx context.Context, cfg *Config) {
	ctx, cancel := context.WithTimeout(ctx, orphanScanLimit)
	defer cancel()
	var known []string
	for _, p := range cfg.registry().Providers() {
		known = append(known, p.ID)
	}
	log := cfg.Logger
	for s := 0; s < cfg.Store.Shards(); s++ {
		orphans, err := cfg.Store.Lanes(ctx, s, known...)
		if err != nil {
			log.Warn("dispatch: could not look for orphan lanes", "shard", s, "err", err)
			return
		}
		for _, o := range orphans {
			if o.Err != nil {
				log.Warn("dispatch: could not measure an orphan lane", "shard", s, "provider", o.Provider, "err", o.Err)
				continue
			}
			log.Warn("dispatch: orphan lane: its provider is not in the registry and nothing serves it; re-add the provider or move its jobs",
				"shard", s, "provider", o.Provider, "stream", cfg.Store.Keys(s).Lane(o.Provider), "length", o.Length, "pending", o.Pending)
		}
	}
}

// warnRedisSettings logs a warning for each Redis node (of Config.Upstream) that runs with AOF
// off, where a restart of Redis loses the jobs and records written since its last snapshot,
// or with no maxmemory, where Redis grows until the host runs out of memory rather than
// refusing writes, which the worker rides out (docs/operations.md). Best effort: a failure to
// look is logged and the worker starts anyway.
func warnRedisSettings(ctx context.Context, cfg *Config) {
	if cfg.Upstream == nil {
		return
	}
	mem, err := cfg.Upstream.Memory(ctx)
	if err != nil {
		cfg.Logger.Warn("dispatch: could not read redis's settings (INFO)", "err", err)
		return
	}
	for _, m := range mem {
		if !m.AOF {
			cfg.Logger.Warn("dispatch: redis has AOF off (appendonly no): a restart of redis loses the jobs and records written since its last snapshot",
				"node", m.Addr, "role", m.Role)
		}
		if m.MaxMemory == 0 {
			cfg.Logger.Warn("dispatch: redis has no maxmemory: it grows until the host runs out of memory instead of refusing writes",
				"node", m.Addr, "role", m.Role)
		}
	}
}
