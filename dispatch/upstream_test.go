package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// TestUpstreamGaugesAndRedisWarnings: the statistics loop exports the lag and pending count of
// an upstream's consumer group on the ledger, summed over the shards, and Redis's memory
// against its maxmemory; at start the worker warns that Redis runs with AOF off and without a
// maxmemory.
func TestUpstreamGaugesAndRedisWarnings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{shards: 2, wallClock: true})
	ctx := context.Background()
	c := e.redis.Client(t)
	if err := c.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	// "pruner" reads both shards' ledgers: 3 of shard 0's 5 entries read, 2 of them acked;
	// nothing of shard 1's 4 read.
	for shard, n := range []int{5, 4} {
		key := e.store.Keys(shard).Results
		for range n {
			e.xadd(key, "id", "x", "code", "ACCEPTED")
		}
		if err := c.XGroupCreate(ctx, key, "pruner", "0").Err(); err != nil {
			t.Fatal(err)
		}
	}
	key0 := e.store.Keys(0).Results
	got, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "pruner", Consumer: "p", Streams: []string{key0, ">"}, Count: 3}).Result()
	if err != nil || len(got[0].Messages) != 3 {
		t.Fatalf("XREADGROUP: %v, %v", got, err)
	}
	c.XAck(ctx, key0, "pruner", got[0].Messages[0].ID, got[0].Messages[1].ID)

	reg := telemetry.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.MetricsOptions{Providers: e.reg.IDs()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(e.store)
	cfg.Metrics, cfg.StatsEvery, cfg.Upstream = m, 50*time.Millisecond, stream.KeyspaceOf(e.store)
	e.start(cfg)
	waitFor(t, "the upstream group's gauges", func() bool {
		lag, ok := metricstest.Gather(t, reg).Lookup(telemetry.UpstreamGroupLag, "stream", "results", "group", "pruner")
		return ok && lag == 2+4
	})
	f := metricstest.Gather(t, reg)
	if v := f.Value(t, telemetry.UpstreamGroupPending, "stream", "results", "group", "pruner"); v != 1 {
		t.Errorf("%s{results,pruner} = %v; want 1", telemetry.UpstreamGroupPending, v)
	}
	if v := f.Value(t, telemetry.UpstreamGroups, "stream", "results"); v != 1 {
		t.Errorf("%s{results} = %v; want 1", telemetry.UpstreamGroups, v)
	}
	node := e.redis.Addr()
	if v := f.Value(t, telemetry.RedisMemoryUsed, "node", node); v <= 0 {
		t.Errorf("%s{node=%s} = %v; want Redis's used_memory", telemetry.RedisMemoryUsed, node, v)
	}
	if v, ok := f.Lookup(telemetry.RedisMaxmemory, "node", node); !ok || v != 0 {
		t.Errorf("%s{node=%s} = %v, %v; want 0 (no limit)", telemetry.RedisMaxmemory, node, v, ok)
	}
	logs := e.logs.String()
	for _, want := range []string{"redis has AOF off", "redis has no maxmemory"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the worker's log does not warn %q", want)
		}
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1gb").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "maxmemory's gauge", func() bool {
		v, ok := metricstest.Gather(t, reg).Lookup(telemetry.RedisMaxmemory, "node", node)
		return ok && v == 1<<30
	})
}
