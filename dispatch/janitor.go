package dispatch

import (
	"context"
	"sync"

	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// janitorParams configure the consumer janitor.
type janitorParams struct {
	cfg   *Config // shared, read-only after Run applied the defaults
	lanes *laneTable
}

// janitor removes consumers that left the groups (every restarted pod is a new consumer) once
// they have been idle for JanitorIdle. The store's script removes a consumer only when it has
// nothing pending, so no entry ever becomes unclaimable; this loop only decides when to ask.
type janitor struct {
	janitorParams
	stopper
}

func newJanitor(p janitorParams) *janitor {
	return &janitor{janitorParams: p, stopper: newStopper()}
}

// start runs the loop in a goroutine counted in wg; the first round is one period in.
func (j *janitor) start(wg *sync.WaitGroup) {
	goCounted(wg, func() { ticking(j.done, j.cfg.JanitorEvery, false, j.cfg, "janitor", j.clean) })
}

// clean asks the store to remove idle, empty consumers from every grouped stream.
func (j *janitor) clean(ctx context.Context) error {
	cfg := j.cfg
	for s := 0; s < cfg.Store.Shards(); s++ {
		streams := []string{cfg.Store.IntakeStream(s)}
		for _, p := range j.lanes.providers() {
			streams = append(streams, cfg.Store.LaneStream(s, p))
		}
		for _, st := range streams {
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
