package dispatch

import (
	"context"
	"errors"
)

// prober asks every shard, every ProbeEvery, whether it accepts writes (stream's ProbeWrite,
// which writes nothing), and tells redisHealth. The other loops' calls report failures as they
// happen; the prober is what notices that writes are refused while this process writes
// nothing, and that they are accepted again once memory is back.
// Run ticks probe at start and then every ProbeEvery.
type prober struct {
	cfg    *Config // shared, read-only after Run applied the defaults
	health *redisHealth
}

// probe asks every shard once. Its findings go to redisHealth, which logs them; it never fails.
// It is also the background Redis check of /readyz: ready while every shard answers.
func (p *prober) probe(ctx context.Context) error {
	var failed error
	for s := 0; s < p.cfg.Store.Shards(); s++ {
		err := p.cfg.Store.ProbeWrite(ctx, s)
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil // stopping; a round that ran out of time is a failed check
		}
		p.health.probed(s, err, p.cfg.Now())
		if err != nil && failed == nil {
			failed = err
		}
	}
	p.cfg.Health.RedisChecked(p.cfg.Now(), failed)
	return nil
}
