package dispatch

import (
	"context"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// stats reads the queue gauges from Redis every StatsEvery (stream's QueueStats: one script of
// a constant number of commands per key, whatever the backlog) and hands them to the metrics,
// with the live replicas and the VAPID signatures. A scrape never reaches Redis: it reads what
// this loop last wrote, and webpush_queue_stats_refreshed_timestamp_seconds says when that was.
// The same round keeps each shard's record streams (ledger, gone, dead) near their bounds
// (stream's TrimRecords), so that they hold at most about StatsEvery's records more.
// Run ticks round at start and then every StatsEvery.
type stats struct {
	cfg       *Config // shared, read-only after Run applied the defaults
	lanes     *laneTable
	heartbeat *heartbeat
	health    *redisHealth
}

// round reads every shard. A shard that cannot be read leaves the gauges as they were (their
// refreshed timestamp then ages, which an alert watches) and fails the round.
func (st *stats) round(ctx context.Context) error {
	cfg := st.cfg
	if v := st.heartbeat.alive(); v != nil {
		cfg.Metrics.SetReplicas(len(v.names))
	}
	if cfg.Signatures != nil {
		for key, n := range cfg.Signatures() {
			cfg.Metrics.VAPIDSignatures(key, n)
		}
	}
	now := cfg.Now()
	providers := st.lanes.providers()
	var all []telemetry.QueueStat
	for s := 0; s < cfg.Store.Shards(); s++ {
		qs, err := cfg.Store.QueueStats(ctx, s, providers, now)
		st.health.observe(s, telemetry.OpStats, err, cfg.Now())
		if err != nil {
			return err
		}
		if _, err := cfg.Store.TrimRecords(ctx, s); err != nil {
			st.health.observe(s, telemetry.OpStats, err, cfg.Now())
			return err
		}
		for _, q := range qs {
			t := telemetry.QueueStat{Shard: s, Stream: q.Stream, Entries: q.Entries, Lag: max(q.Lag, 0), HasPending: !q.OldestPending.IsZero()}
			if t.HasPending {
				t.OldestPendingAge = max(now.Sub(q.OldestPending), 0)
			}
			all = append(all, t)
		}
	}
	cfg.Metrics.SetQueueStats(all, now)
	st.upstream(ctx)
	return nil
}

// UpstreamReader is what a worker reads of Redis for the operators beyond its own keys: the
// consumer groups upstreams read the record streams with, and each node's memory and
// persistence. *stream.Keyspace is one (stream.KeyspaceOf the worker's Store).
type UpstreamReader interface {
	UpstreamGroups(ctx context.Context, shard int) ([]stream.UpstreamGroup, error)
	Memory(ctx context.Context) ([]stream.NodeMemory, error)
}

// upstream sets the gauges of the upstreams' consumer groups and of Redis's memory. Best
// effort: a failed read (an ACL without XINFO or INFO) leaves them as they were, logged at
// debug level, and never fails the round, whose queue gauges the scaling reads.
func (st *stats) upstream(ctx context.Context) {
	cfg := st.cfg
	if cfg.Upstream == nil || cfg.Metrics == nil {
		return
	}
	var groups []telemetry.UpstreamGroup
	ok := true
	for s := 0; s < cfg.Store.Shards(); s++ {
		gs, err := cfg.Upstream.UpstreamGroups(ctx, s)
		if err != nil {
			cfg.Logger.Debug("dispatch: could not read the upstreams' consumer groups", "shard", s, "err", err)
			ok = false
			break
		}
		for _, g := range gs {
			groups = append(groups, telemetry.UpstreamGroup{Stream: g.Stream, Group: g.Group, Lag: g.Lag, Pending: g.Pending})
		}
	}
	if ok {
		cfg.Metrics.SetUpstream(groups)
	}
	mem, err := cfg.Upstream.Memory(ctx)
	if err != nil {
		cfg.Logger.Debug("dispatch: could not read redis's memory", "err", err)
		return
	}
	nodes := make([]telemetry.RedisNode, len(mem))
	for i, m := range mem {
		nodes[i] = telemetry.RedisNode{Node: m.Addr, Used: m.UsedMemory, MaxMemory: m.MaxMemory}
	}
	cfg.Metrics.SetRedisMemory(nodes)
}
