package stream

import (
	_ "embed"

	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

var (
	//go:embed queue_stats.lua
	queueStatsLua    string
	queueStatsScript = redis.NewScript(queueStatsLua)
)

// QueueStat is one stream or set of a shard, as QueueStats reads it.
type QueueStat struct {
	Shard int
	// Stream is "intake", "intake:bulk", "delayed", "dead", "results", "gone", "lane:<provider>" or
	// "lane:<provider>:bulk" (LaneName).
	Stream string
	Key    string
	// Entries is the stream's length (the delayed set's members).
	Entries int64
	// Lag is how many entries the group has not read yet: intake and lanes only (-1 elsewhere).
	Lag int64
	// Pending is how many entries the group read and has not finished; OldestPending is when
	// the oldest of them was added to the stream (zero when none is pending).
	Pending       int64
	OldestPending time.Time
	// DueNow and NextDue are the delayed set's members due at the time asked, and the first
	// member's due time (zero when the set is empty).
	DueNow  int64
	NextDue time.Time
	// Scheduled and NextSendAt are the delayed set's scheduled jobs (ToScheduled) whose send_at
	// is after the time asked, and the first of those send_ats (zero when none).
	Scheduled  int64
	NextSendAt time.Time
}

// QueueStats reads the streams and sets of shard, and the lanes of providers on it, in one
// script of a constant number of commands per key (never a scan of a stream). now decides which
// retries are due. The worker reads them for its metrics.
func (s *Store) QueueStats(ctx context.Context, shard int, providers []string, now time.Time) ([]QueueStat, error) {
	return s.queueStats(ctx, shard, providers, now)
}

func (s *keyspace) queueStats(ctx context.Context, shard int, providers []string, now time.Time) ([]QueueStat, error) {
	k := KeysFor(s.o.Prefix, shard)
	// The scheduled set gives no row of its own: it adds to the delayed set's.
	keys := []string{k.Intake, k.Delayed, k.Dead, k.Results, k.Gone, k.Scheduled, k.BulkIntake}
	names := []string{"intake", "delayed", "dead", "results", "gone", "", "intake:bulk"}
	for _, p := range providers {
		for _, c := range job.Classes {
			keys = append(keys, k.LaneOf(p, c))
			names = append(names, LaneName(p, c))
		}
	}
	v, err := queueStatsScript.Run(ctx, s.c, keys, Group, ms(now)).Slice()
	if err != nil {
		return nil, fmt.Errorf("stream: queue stats of shard %d: %w", shard, err)
	}
	keys, names = slices.Delete(keys, 5, 6), slices.Delete(names, 5, 6)
	if len(v) != len(keys) {
		return nil, fmt.Errorf("stream: queue stats of shard %d: %d replies for %d keys", shard, len(v), len(keys))
	}
	// The bulk intake is read with the grouped streams, and listed after the other intake.
	keys, names, v = moveTo1(keys, 5), moveTo1(names, 5), moveTo1(v, 5)
	out := make([]QueueStat, len(keys))
	for i, x := range v {
		row, _ := x.([]any)
		if want := 4 + 2*boolInt(names[i] == "delayed"); len(row) != want {
			return nil, fmt.Errorf("stream: queue stats of %s: unexpected reply %v", keys[i], x)
		}
		n := func(j int) int64 { c, _ := row[j].(int64); return c }
		last, _ := row[3].(string)
		q := QueueStat{Shard: shard, Stream: names[i], Key: keys[i], Entries: n(0), Lag: n(1), Pending: n(2)}
		if names[i] == "delayed" {
			q.Lag, q.Pending, q.DueNow = -1, 0, n(1)
			if due, err := strconv.ParseFloat(last, 64); err == nil {
				q.NextDue = time.UnixMilli(int64(due))
			}
			q.Scheduled = n(4)
			if next, _ := row[5].(string); next != "" {
				if at, err := strconv.ParseFloat(next, 64); err == nil {
					q.NextSendAt = time.UnixMilli(int64(at))
				}
			}
		} else if last != "" {
			q.OldestPending = entryTime(last)
		}
		out[i] = q
	}
	return out, nil
}

// WrittenAt is when the entry was added to its stream, by Redis's clock: the milliseconds part
// of its id (zero for an id without them).
func (e Entry) WrittenAt() time.Time { return entryTime(e.ID) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// moveTo1 moves s[i] to s[1], the elements between one place on.
func moveTo1[T any](s []T, i int) []T {
	x := s[i]
	return slices.Insert(slices.Delete(s, i, i+1), 1, x)
}
