package inspect

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

// Counts sums over the shards the length of every stream and set: "intake", "intake:bulk",
// "lane:<provider>",
// "lane:<provider>:bulk",
// "pending" (read, not finished, all streams), "delayed", "results", "gone", "dead".
func (s *Inspector) Counts(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	for shard := 0; shard < s.o.Shards; shard++ {
		k := s.Keys(shard)
		lanes, err := s.ks.Lanes(ctx, shard)
		if err != nil {
			return nil, err
		}
		pipe := s.c.Pipeline()
		lens := map[string]*redis.IntCmd{
			"intake": pipe.XLen(ctx, k.Intake), "intake:bulk": pipe.XLen(ctx, k.BulkIntake), "delayed": pipe.ZCard(ctx, k.Delayed),
			"results": pipe.XLen(ctx, k.Results), "gone": pipe.XLen(ctx, k.Gone), "dead": pipe.XLen(ctx, k.Dead),
		}
		pend := []*redis.XPendingCmd{pipe.XPending(ctx, k.Intake, stream.Group), pipe.XPending(ctx, k.BulkIntake, stream.Group)}
		for _, p := range lanes {
			for _, c := range job.Classes {
				lens[stream.LaneName(p, c)] = pipe.XLen(ctx, k.LaneOf(p, c))
				pend = append(pend, pipe.XPending(ctx, k.LaneOf(p, c), stream.Group))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !scan.NoGroup(err) {
			return nil, fmt.Errorf("inspect: counts: %w", err)
		}
		for name, c := range lens {
			if c.Err() != nil {
				return nil, fmt.Errorf("inspect: counts %s: %w", name, c.Err())
			}
			out[name] += c.Val()
		}
		out["pending"] += 0
		for _, c := range pend {
			if c.Err() == nil {
				out["pending"] += c.Val().Count
			} else if !scan.NoGroup(c.Err()) {
				return nil, fmt.Errorf("inspect: counts pending: %w", c.Err())
			}
		}
	}
	return out, nil
}
