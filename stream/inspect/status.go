package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

// The read-only queries of the operator's commands (`gateway-worker status`, `inspect`,
// `dead`): they write nothing.

// RecordedShards is the shard count recorded for the Inspector's prefix (stream.ShardsKey), 0
// when no worker or producer has recorded one yet.
func (s *Inspector) RecordedShards(ctx context.Context) (int, error) {
	n, err := s.c.Get(ctx, stream.ShardsKey(s.o.Prefix)).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("inspect: read the shard count from %s: %w", stream.ShardsKey(s.o.Prefix), err)
	}
	return n, nil
}

// VerifyShards is a worker's shard count check for a reader (stream.Keyspace.VerifyShards): it
// compares the Inspector's shard count with the one recorded for its prefix
// (stream.ErrShardCount when they differ) and records nothing.
func (s *Inspector) VerifyShards(ctx context.Context) error {
	return s.ks.VerifyShards(ctx)
}

// AllLanes lists, for every shard, the providers with a lane stream there (of either class),
// sorted: one SCAN of the keyspace for all shards (on every master of a cluster), where
// stream.Keyspace.Lanes makes one per shard. An operator's query: SCAN walks every key.
func (s *Inspector) AllLanes(ctx context.Context) (map[int][]string, error) {
	prefix := s.o.Prefix
	keys, err := scan.Keys(ctx, s.c, scan.GlobEscape(prefix+":{")+"*}:lane:*")
	if err != nil {
		return nil, err
	}
	out := map[int][]string{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix+":{")
		if !ok {
			continue
		}
		shardText, name, ok := strings.Cut(rest, "}:")
		shard, err := strconv.Atoi(shardText)
		provider, _, isLane := stream.ParseLaneName(name) // either class's lane names the provider
		if !ok || !isLane || err != nil || shard < 0 || shard >= s.o.Shards {
			continue // a shard above the count, or a key that only looks like a lane
		}
		out[shard] = append(out[shard], provider)
	}
	for shard, lanes := range out {
		sort.Strings(lanes)
		out[shard] = slices.Compact(lanes) // a provider with both classes' lanes, once
	}
	return out, nil
}

// HasLane reports whether provider has a lane on any shard (AllLanes: one SCAN).
func (s *Inspector) HasLane(ctx context.Context, provider string) (bool, error) {
	lanes, err := s.AllLanes(ctx)
	if err != nil {
		return false, err
	}
	for _, ps := range lanes {
		if slices.Contains(ps, provider) {
			return true, nil
		}
	}
	return false, nil
}

// LeftShards are the shards beyond the ones the Inspector reads that still hold a queue or a
// record: what a larger shard count left (docs/operations.md, "Changing the shard count").
func (s *Inspector) LeftShards(ctx context.Context) ([]int, error) {
	return s.ks.LeftoverShards(ctx, s.Shards())
}

// auditShards are the shards whose records and queues Audit reads: every shard the Inspector
// reads, and any beyond them that a larger shard count left (their records are still the
// jobs' records).
func (s *Inspector) auditShards(ctx context.Context) ([]int, error) {
	left, err := s.ks.LeftoverShards(ctx, s.Shards())
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, s.Shards()+len(left))
	for shard := range s.Shards() {
		out = append(out, shard)
	}
	return append(out, left...), nil
}
