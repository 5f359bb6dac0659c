package stream

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed trim_records.lua
	trimRecordsLua    string
	trimRecordsScript = redis.NewScript(trimRecordsLua)
)

// The worker's record stream bounds (Options.ResultsMaxLen, GoneMaxLen, DeadMaxLen), in
// entries: a ledger record is about 60 bytes, a gone record about 200 and a dead one carries
// its job (BENCHMARKS.md).
const (
	DefaultResultsMaxLen = 1_000_000
	DefaultGoneMaxLen    = 100_000
	DefaultDeadMaxLen    = 100_000
)

// TrimRecords trims the ledger, gone and dead streams of shard to about their bounds (Options)
// and reports how many entries each held over its bound, by "results", "gone" and "dead". A
// stream that consumer groups read (an upstream that consumes it with XREADGROUP) keeps every
// entry some group has not read or not acknowledged, however many: its bound then trims only
// what every group is done with. The worker calls it every few seconds on every replica
// (dispatch's statistics loop), so a stream may hold that long's records over its bound.
func (s *Store) TrimRecords(ctx context.Context, shard int) (map[string]int64, error) {
	k := s.Keys(shard)
	v, err := trimRecordsScript.Run(ctx, s.c, []string{k.Results, k.Gone, k.Dead},
		s.bounds.results, s.bounds.gone, s.bounds.dead).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("stream: trim the record streams of shard %d: %w", shard, err)
	}
	if len(v) != 3 {
		return nil, fmt.Errorf("stream: trim the record streams of shard %d: %w", shard, errShortReply)
	}
	return map[string]int64{"results": v[0], "gone": v[1], "dead": v[2]}, nil
}

// recordBounds are the record streams' bounds in entries, 0 for none.
type recordBounds struct{ results, gone, dead int64 }
