package telemetry

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The upstream's consumer groups and Redis's memory, as the statistics loop last read them.
const (
	UpstreamGroupLag     = "webpush_upstream_group_lag"
	UpstreamGroupPending = "webpush_upstream_group_pending"
	UpstreamGroups       = "webpush_upstream_groups"
	RedisMemoryUsed      = "webpush_redis_memory_used_bytes"
	RedisMaxmemory       = "webpush_redis_maxmemory_bytes"
)

// MaxUpstreamGroups bounds the groups exported per record stream: group names come from Redis
// (any upstream may create one), so past this many only the ones with the largest lags get
// series; webpush_upstream_groups still counts them all. MaxRedisNodes bounds the nodes the
// memory gauges are exported for in the same way (a cluster's nodes, by address).
const (
	MaxUpstreamGroups = 20
	MaxRedisNodes     = 64
)

// UpstreamGroup is a consumer group an upstream reads a record stream with (Stream is
// StreamResults, StreamGone or StreamDead), its lag and pending count summed over the shards.
type UpstreamGroup struct {
	Stream, Group string
	Lag, Pending  int64
}

// RedisNode is one Redis node's memory: used_memory and maxmemory (0: no limit) in bytes.
type RedisNode struct {
	Node            string // the node's address; "" for the one node of a client that does not say
	Used, MaxMemory int64
}

// upstreamCollector exports what SetUpstream and SetRedisMemory last set.
type upstreamCollector struct {
	lag, pending, groups, used, max *prometheus.Desc

	mu     sync.Mutex
	gs     []UpstreamGroup // guarded by mu
	counts map[string]int  // guarded by mu: groups by stream, before the bound
	nodes  []RedisNode     // guarded by mu
}

func newUpstreamCollector() *upstreamCollector {
	return &upstreamCollector{
		lag: prometheus.NewDesc(UpstreamGroupLag,
			"Entries of a record stream (results, gone, dead) an upstream's consumer group has not read yet, summed over the shards; an estimate where Redis cannot count it. Only the groups with the largest lags when a stream has more than the bound.",
			[]string{"stream", "group"}, nil),
		pending: prometheus.NewDesc(UpstreamGroupPending,
			"Entries of a record stream an upstream's consumer group read and has not acknowledged, summed over the shards.",
			[]string{"stream", "group"}, nil),
		groups: prometheus.NewDesc(UpstreamGroups,
			"Consumer groups on a record stream (results, gone, dead), every one of them, exported or not.",
			[]string{"stream"}, nil),
		used: prometheus.NewDesc(RedisMemoryUsed, "Redis's used_memory, by node.", []string{"node"}, nil),
		max:  prometheus.NewDesc(RedisMaxmemory, "Redis's maxmemory, by node; 0 means no limit.", []string{"node"}, nil),
	}
}

func (c *upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.pending, c.groups, c.used, c.max} {
		ch <- d
	}
}

func (c *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range []string{StreamResults, StreamGone, StreamDead} {
		if n, ok := c.counts[s]; ok {
			ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(n), s)
		}
	}
	for _, g := range c.gs {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(g.Lag), g.Stream, g.Group)
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(g.Pending), g.Stream, g.Group)
	}
	for _, n := range c.nodes {
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(n.Used), n.Node)
		ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(n.MaxMemory), n.Node)
	}
}

// SetUpstream replaces the upstream group gauges with groups (one entry per shard and group,
// or already summed): they are summed by stream and group, and of each stream at most
// MaxUpstreamGroups are kept, the largest lags first. A stream outside results, gone and dead
// is left out, and a group name that is not valid UTF-8 has its invalid bytes replaced.
func (m *Metrics) SetUpstream(groups []UpstreamGroup) {
	if m == nil {
		return
	}
	sum := map[[2]string]*UpstreamGroup{}
	var all []*UpstreamGroup
	for _, g := range groups {
		if g.Stream != StreamResults && g.Stream != StreamGone && g.Stream != StreamDead {
			continue
		}
		name := strings.ToValidUTF8(g.Group, "\uFFFD")
		k := [2]string{g.Stream, name}
		if sum[k] == nil {
			sum[k] = &UpstreamGroup{Stream: g.Stream, Group: name}
			all = append(all, sum[k])
		}
		sum[k].Lag += g.Lag
		sum[k].Pending += g.Pending
	}
	slices.SortFunc(all, func(a, b *UpstreamGroup) int {
		return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(b.Lag, a.Lag), cmp.Compare(a.Group, b.Group))
	})
	counts := map[string]int{StreamResults: 0, StreamGone: 0, StreamDead: 0}
	var kept []UpstreamGroup
	for _, g := range all {
		counts[g.Stream]++
		if counts[g.Stream] <= MaxUpstreamGroups {
			kept = append(kept, *g)
		}
	}
	c := m.upstream
	c.mu.Lock()
	c.gs, c.counts = kept, counts
	c.mu.Unlock()
}

// SetRedisMemory replaces the Redis memory gauges with nodes (at most MaxRedisNodes of them,
// by address); a node without an address is node="redis".
func (m *Metrics) SetRedisMemory(nodes []RedisNode) {
	if m == nil {
		return
	}
	out := make([]RedisNode, 0, min(len(nodes), MaxRedisNodes))
	for _, n := range nodes {
		if n.Node == "" {
			n.Node = "redis"
		}
		n.Node = strings.ToValidUTF8(n.Node, "\uFFFD")
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b RedisNode) int { return cmp.Compare(a.Node, b.Node) })
	out = slices.CompactFunc(out, func(a, b RedisNode) bool { return a.Node == b.Node })
	if len(out) > MaxRedisNodes {
		out = out[:MaxRedisNodes]
	}
	c := m.upstream
	c.mu.Lock()
	c.nodes = out
	c.mu.Unlock()
}
