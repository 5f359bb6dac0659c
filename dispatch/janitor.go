package dispatch

import (
	"context"

	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// janitor removes consumers that left the groups (every restarted pod is a new consumer) once
// they have been idle for JanitorIdle. The store's script removes a consumer only when it has
// nothing pending, so no entry ever becomes unclaimable; this loop only decides when to ask.
// Run ticks clean every JanitorEvery, the first time one period in.
type janitor struct {
	cfg   *Config // shared, read-only after Run applied the defaults
	lanes *laneTable
}

// clean asks the store to remove idle, empty consumers from every grouped stream.
func (j *janitor) clean(ctx context.Context) error {
	cfg := j.cfg
	for s := 0; s < cfg.Store.Shards(); s++ {
		for _, st := range groupStreams(cfg.Store.Keys(s), j.lanes.providers()) {
			removed, err := cfg.Store.CleanConsumers(ctx, s, st, cfg.JanitorIdle)
			if err != nil {
				if ctx.Err() == nil {
					cfg.Metrics.RedisError(telemetry.OpJanitor)
				}
				return err
			}
			if len(removed) > 0 {
				cfg.Logger.Info("dispatch: idle consumers removed", "stream", st, "consumers", removed)
			}
		}
	}
	return nil
}
