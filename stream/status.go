package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The read-only queries of the operator's commands (`gateway-worker status`, `inspect`,
// `dead`): they write nothing.

// RecordedShards is the shard count recorded for the Inspector's prefix (ShardsKey), 0 when no
// worker or producer has recorded one yet.
func (s *Inspector) RecordedShards(ctx context.Context) (int, error) {
	n, err := s.c.Get(ctx, ShardsKey(s.o.Prefix)).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream: read the shard count from %s: %w", ShardsKey(s.o.Prefix), err)
	}
	return n, nil
}

// VerifyShards is Store.Setup's shard count check for a reader: it compares the Inspector's
// shard count with the one recorded for its prefix (ErrShardCount when they differ) and
// records nothing.
func (s *Inspector) VerifyShards(ctx context.Context) error {
	return checkShards(ctx, s.c, s.o.Prefix, s.o.Shards, false)
}

// AllLanes lists, for every shard, the providers with a lane stream there (of either class), sorted: one
// SCAN of the keyspace for all shards (on every master of a cluster), where Lanes makes one per
// shard. An operator's query: SCAN walks every key.
func (s *Inspector) AllLanes(ctx context.Context) (map[int][]string, error) {
	prefix := s.o.Prefix
	keys, err := s.scanKeys(ctx, globEscape(prefix+":{")+"*}:lane:*")
	if err != nil {
		return nil, err
	}
	out := map[int][]string{}
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix+":{")
		if !ok {
			continue
		}
		shardText, provider, ok := strings.Cut(rest, "}:lane:")
		shard, err := strconv.Atoi(shardText)
		if !ok || err != nil || shard < 0 || shard >= s.o.Shards || provider == "" {
			continue // a shard above the count, or a key that only looks like a lane
		}
		out[shard] = append(out[shard], strings.TrimSuffix(provider, bulkSuffix))
	}
	for shard, lanes := range out {
		sort.Strings(lanes)
		out[shard] = slices.Compact(lanes) // a provider with both classes' lanes, once
	}
	return out, nil
}

// NodeMemory is one Redis node's memory, as INFO reports it.
type NodeMemory struct {
	// Addr is the node's address ("" when the client does not say, as a Sentinel client).
	Addr string
	// Role is "master" or "slave", as INFO replication says.
	Role string
	// UsedMemory and PeakMemory are used_memory and used_memory_peak in bytes; MaxMemory is
	// maxmemory, 0 for no limit, and Policy maxmemory_policy.
	UsedMemory, PeakMemory, MaxMemory int64
	Policy                            string
	// AOF is INFO persistence's aof_enabled: with it off, a restart of Redis loses every write
	// since its last snapshot, jobs and records included.
	AOF bool
}

// Memory reads INFO memory (and persistence's aof_enabled) of the Redis the Inspector uses: one node, or every node of a cluster
// (masters and replicas), sorted by address.
func (s *Inspector) Memory(ctx context.Context) ([]NodeMemory, error) {
	read := func(ctx context.Context, c *redis.Client) (NodeMemory, error) {
		info, err := c.Info(ctx, "memory", "replication", "persistence").Result()
		if err != nil {
			return NodeMemory{}, err
		}
		n := func(f string) int64 { v, _ := strconv.ParseInt(infoField(info, f), 10, 64); return v }
		return NodeMemory{
			Addr: c.Options().Addr, Role: infoField(info, "role"),
			UsedMemory: n("used_memory"), PeakMemory: n("used_memory_peak"), MaxMemory: n("maxmemory"),
			Policy: infoField(info, "maxmemory_policy"), AOF: infoField(info, "aof_enabled") == "1",
		}, nil
	}
	switch c := s.c.(type) {
	case *redis.Client:
		m, err := read(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("stream: INFO memory: %w", err)
		}
		if strings.HasPrefix(m.Addr, "FailoverClient") {
			m.Addr = "" // go-redis names a Sentinel client's node so; the master is wherever it is now
		}
		return []NodeMemory{m}, nil
	case *redis.ClusterClient:
		var (
			mu  sync.Mutex // ForEachShard runs fn concurrently
			out []NodeMemory
		)
		err := c.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			m, err := read(ctx, node)
			if err != nil {
				return fmt.Errorf("%s: %w", node.Options().Addr, err)
			}
			mu.Lock()
			out = append(out, m)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("stream: INFO memory: %w", err)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
		return out, nil
	default:
		return nil, fmt.Errorf("stream: INFO memory: a %T is not a client this knows", s.c)
	}
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
