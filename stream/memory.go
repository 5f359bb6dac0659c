package stream

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

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

// Memory reads INFO memory (and persistence's aof_enabled) of the Redis the Keyspace uses: one
// node, or every node of a cluster (masters and replicas), sorted by address.
func (s *Keyspace) Memory(ctx context.Context) ([]NodeMemory, error) {
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
