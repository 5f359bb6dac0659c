package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A prefix's shard count changes on a live system in two steps (docs/operations.md):
//
//  1. Workers start with the new count and ReshardFrom the old one. The first of them records
//     the new count (switchShards), so producers started from then on must use it; producers
//     already running keep writing with the old one. Every such worker reads the shards of
//     both counts, so whatever either kind of producer writes is delivered.
//  2. Once every producer writes with the new count and the old count's shards beyond it are
//     empty, workers start without ReshardFrom. Each one checks at start that no shard beyond
//     the ones it reads holds work (checkLeftovers) and refuses to start otherwise, so the
//     step cannot strand jobs that are already there.
//
// A job's shard depends on the count, so during the change the dedupe of copies (the jobs
// index and the duplicate-suppression window, which are per shard) holds only between copies enqueued with the
// same count.

// switchScript records ARGV[1] as the shard count in KEYS[1] when none is recorded or the
// recorded one is ARGV[2], and returns the count recorded afterwards.
var switchScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or v == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return v
`)

// switchShards records to as the shard count of prefix in place of from (or of none); it
// fails, changing nothing, when another count is recorded.
func switchShards(ctx context.Context, c redis.UniversalClient, prefix string, from, to int) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	key := ShardsKey(prefix)
	got, err := switchScript.Run(ctx, c, []string{key}, strconv.Itoa(to), strconv.Itoa(from)).Text()
	if err != nil {
		return fmt.Errorf("stream: record the shard count: %w", err)
	}
	if got != strconv.Itoa(to) {
		return fmt.Errorf("%w: prefix %q is used with %s shards (recorded in %s); this process changes the count from %d to %d, so it refuses any other; see docs/operations.md to change the shard count",
			ErrShardCount, prefix, got, key, from, to)
	}
	return nil
}

// leftoverShards are the shards numbered from and up (to MaxShards) of which any key a job
// can be in, a terminal record, or a campaign exists: what a larger shard count left behind.
func (s *keyspace) leftoverShards(ctx context.Context, from int) ([]int, error) {
	if from >= MaxShards {
		return nil, nil
	}
	pipe := s.c.Pipeline()
	cmds := make([]*redis.IntCmd, 0, MaxShards-from)
	for shard := from; shard < MaxShards; shard++ {
		k := KeysFor(s.o.Prefix, shard)
		cmds = append(cmds, pipe.Exists(ctx, k.Intake, k.BulkIntake, k.Delayed, k.Results, k.Dead, campaignKeys(s.o.Prefix, shard, "").All))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("stream: look for shards beyond %d: %w", from, err)
	}
	var out []int
	for i, c := range cmds {
		if c.Val() > 0 {
			out = append(out, from+i)
		}
	}
	return out, nil
}

// checkLeftovers refuses, with ErrShardCount, a Store that does not read a shard that still
// holds jobs (in its intake, a lane or its delayed set) or campaigns' recipients waiting in
// their lists: a shard a larger shard count left,
// which only a worker started with ReshardFrom reads. When such shards exist, their lanes are
// found with one SCAN of the keyspace.
func (s *Store) checkLeftovers(ctx context.Context) error {
	left, err := s.leftoverShards(ctx, s.Shards())
	if err != nil || len(left) == 0 {
		return err
	}
	lanes, err := s.scanKeys(ctx, globEscape(s.o.Prefix)+":{*}:lane:*")
	if err != nil {
		return err
	}
	lists, err := s.scanKeys(ctx, globEscape(s.o.Prefix)+":{*}:campaign:*:p:*")
	if err != nil {
		return err
	}
	var busy []string
	for _, shard := range left {
		k := s.Keys(shard)
		pipe := s.c.Pipeline()
		intake, bulkIntake, delayed := pipe.XLen(ctx, k.Intake), pipe.XLen(ctx, k.BulkIntake), pipe.ZCard(ctx, k.Delayed)
		var laneLens, listLens []*redis.IntCmd
		for _, l := range lanes {
			if strings.HasPrefix(l, k.LanePrefix) {
				laneLens = append(laneLens, pipe.XLen(ctx, l))
			}
		}
		for _, l := range lists {
			if strings.HasPrefix(l, k.Base) {
				listLens = append(listLens, pipe.LLen(ctx, l))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("stream: measure shard %d: %w", shard, err)
		}
		var lane, queued int64
		for _, c := range laneLens {
			lane += c.Val()
		}
		for _, c := range listLens {
			queued += c.Val()
		}
		if n := intake.Val() + bulkIntake.Val() + lane + delayed.Val() + queued; n > 0 {
			what := fmt.Sprintf("shard %d (%d intake entries, %d lane entries, %d retries waiting", shard, intake.Val()+bulkIntake.Val(), lane, delayed.Val())
			if queued > 0 {
				what += fmt.Sprintf(", %d campaign recipients waiting", queued)
			}
			busy = append(busy, what+")")
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return fmt.Errorf("%w: prefix %q has jobs in shards this process does not read (it reads 0 to %d): %s; a larger shard count left them, so run the workers with --reshard-from %d (Options.ReshardFrom) until those shards are empty (docs/operations.md)",
		ErrShardCount, s.o.Prefix, s.Shards()-1, strings.Join(busy, ", "), left[len(left)-1]+1)
}
