package inspect

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// StatusReport is the state of a prefix as an operator reads it (`gateway-worker status`,
// whose --json prints it as it is).
type StatusReport struct {
	Prefix string        `json:"prefix"`
	Shards int           `json:"shards"`
	At     time.Time     `json:"at"`
	Queues []QueueStatus `json:"queues"`
	// LeftShards are the shards beyond Shards whose intake, lanes or delayed set still hold
	// jobs (a shrink of the shard count left them, until drained); their queues are in Queues,
	// after those of the shards in use.
	LeftShards []int           `json:"left_shards"`
	Replicas   []ReplicaStatus `json:"replicas"`
	// StaleAfterSeconds is the heartbeat age past which a replica no longer counts as live.
	StaleAfterSeconds float64       `json:"stale_after_seconds"`
	Paused            []PauseStatus `json:"paused"`
	// KeyParks are the senders (provider, VAPID key) parked fleet-wide after a push service's
	// long Retry-After: their jobs wait in the delayed set until the park ends.
	KeyParks []KeyParkStatus `json:"key_parks"`
	Memory   []MemoryStatus  `json:"memory"`
	// UpstreamGroups are the consumer groups upstreams read the record streams with, by shard,
	// stream and group (UpstreamGroups).
	UpstreamGroups []stream.UpstreamGroup `json:"upstream_groups"`
}

// KeyParkStatus is a parked sender (stream.KeyPark).
type KeyParkStatus struct {
	Provider     string    `json:"provider"`
	Key          string    `json:"key"`
	Until        time.Time `json:"until"`
	UntilSeconds float64   `json:"until_seconds_from_now"`
	Reason       string    `json:"reason,omitempty"`
	By           string    `json:"by,omitempty"`
}

// QueueStatus is one stream or set of a shard. Lag and the pending fields are only for the
// grouped streams (intake, lanes); DueNow and NextDue only for the delayed set.
type QueueStatus struct {
	Shard                   int        `json:"shard"`
	Stream                  string     `json:"stream"`
	Key                     string     `json:"key"`
	Length                  int64      `json:"length"`
	Lag                     *int64     `json:"lag,omitempty"`
	Pending                 *int64     `json:"pending,omitempty"`
	OldestPendingAt         *time.Time `json:"oldest_pending_at,omitempty"`
	OldestPendingAgeSeconds *float64   `json:"oldest_pending_age_seconds,omitempty"`
	DueNow                  *int64     `json:"due_now,omitempty"`
	NextDue                 *time.Time `json:"next_due,omitempty"`
	// Scheduled and NextSendAt, for the delayed set: its scheduled jobs (those whose send_at
	// is still to come; they are among Length) and the first of their send_ats.
	Scheduled  *int64     `json:"scheduled,omitempty"`
	NextSendAt *time.Time `json:"next_send_at,omitempty"`
}

// ReplicaStatus is a live replica and the state it published (stream.WorkerState).
type ReplicaStatus struct {
	Consumer       string            `json:"consumer"`
	LastSeen       time.Time         `json:"last_seen"`
	LastSeenAgoSec float64           `json:"last_seen_seconds_ago"`
	Version        string            `json:"version,omitempty"`
	Breakers       map[string]string `json:"breakers"`
	// Proxies is the egress proxy (host:port) of each provider that sends through one;
	// ProxyBreakers the state of each proxy's breaker. Both absent when every provider is direct.
	Proxies       map[string]string `json:"proxies,omitempty"`
	ProxyBreakers map[string]string `json:"proxy_breakers,omitempty"`
}

// PauseStatus is a paused provider.
type PauseStatus struct {
	Provider string    `json:"provider"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty"`
	At       time.Time `json:"at"`
}

// MemoryStatus is one Redis node's memory.
type MemoryStatus struct {
	Node      string `json:"node,omitempty"`
	Role      string `json:"role,omitempty"`
	UsedBytes int64  `json:"used_memory"`
	PeakBytes int64  `json:"used_memory_peak"`
	MaxBytes  int64  `json:"maxmemory"`
	Policy    string `json:"maxmemory_policy"`
	AOF       bool   `json:"aof_enabled"`
}

// Status reads the state of the prefix at now: every queue of the shards read (and of those a
// larger shard count left that still hold jobs), the replicas whose heartbeat is at most
// staleAfter old, the pauses, Redis's memory and the upstreams' consumer groups on the record
// streams.
func (s *Inspector) Status(ctx context.Context, staleAfter time.Duration, now time.Time) (StatusReport, error) {
	rep := StatusReport{Prefix: s.o.Prefix, Shards: s.Shards(), At: now.UTC(), StaleAfterSeconds: staleAfter.Seconds(),
		Queues: []QueueStatus{}, Replicas: []ReplicaStatus{}, Paused: []PauseStatus{}, KeyParks: []KeyParkStatus{}, Memory: []MemoryStatus{}}
	lanes, err := s.AllLanes(ctx)
	if err != nil {
		return rep, err
	}
	for shard := range s.Shards() {
		stats, err := s.ks.QueueStats(ctx, shard, lanes[shard], now)
		if err != nil {
			return rep, err
		}
		for _, q := range stats {
			rep.Queues = append(rep.Queues, queueOf(q, now))
		}
	}
	// Shards beyond the count whose queues still hold jobs: what a shrink of the count leaves
	// until the workers with --reshard-from drain it. Their records stay by design, and an
	// emptied stream stays a key, so a key alone does not make a shard left.
	rep.LeftShards = []int{}
	beyond, err := s.LeftShards(ctx)
	if err != nil {
		return rep, err
	}
	for shard := range lanes {
		if shard >= s.Shards() && !slices.Contains(beyond, shard) {
			beyond = append(beyond, shard)
		}
	}
	slices.Sort(beyond)
	for _, shard := range beyond {
		stats, err := s.ks.QueueStats(ctx, shard, lanes[shard], now)
		if err != nil {
			return rep, err
		}
		var jobs int64
		for _, q := range stats {
			if q.Stream == "intake" || q.Stream == "intake:bulk" || q.Stream == "delayed" || strings.HasPrefix(q.Stream, "lane:") {
				jobs += q.Entries
			}
		}
		if jobs == 0 {
			continue
		}
		rep.LeftShards = append(rep.LeftShards, shard)
		for _, q := range stats {
			rep.Queues = append(rep.Queues, queueOf(q, now))
		}
	}
	replicas, err := s.Replicas(ctx, now, staleAfter)
	if err != nil {
		return rep, err
	}
	for _, r := range replicas {
		state := r.Worker()
		rep.Replicas = append(rep.Replicas, ReplicaStatus{
			Consumer: r.Consumer, LastSeen: r.LastSeen.UTC(), LastSeenAgoSec: now.Sub(r.LastSeen).Seconds(),
			Version: state.Version, Breakers: state.Breakers, Proxies: state.Proxies, ProxyBreakers: state.ProxyBreakers,
		})
	}
	pauses, err := s.Pauses(ctx)
	if err != nil {
		return rep, err
	}
	for _, p := range pauses {
		rep.Paused = append(rep.Paused, PauseStatus{Provider: p.Provider, Reason: p.Reason, By: p.By, At: p.At.UTC()})
	}
	parks, err := s.ks.KeyParks(ctx, now)
	if err != nil {
		return rep, err
	}
	for _, p := range parks {
		rep.KeyParks = append(rep.KeyParks, KeyParkStatus{Provider: p.Provider, Key: p.Key, Until: p.Until.UTC(),
			UntilSeconds: p.Until.Sub(now).Seconds(), Reason: p.Reason, By: p.By})
	}
	mem, err := s.ks.Memory(ctx)
	if err != nil {
		return rep, err
	}
	for _, m := range mem {
		rep.Memory = append(rep.Memory, MemoryStatus{Node: m.Addr, Role: m.Role, UsedBytes: m.UsedMemory,
			PeakBytes: m.PeakMemory, MaxBytes: m.MaxMemory, Policy: m.Policy, AOF: m.AOF})
	}
	if err := s.upstreamStatus(ctx, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func queueOf(q stream.QueueStat, now time.Time) QueueStatus {
	out := QueueStatus{Shard: q.Shard, Stream: q.Stream, Key: q.Key, Length: q.Entries}
	grouped := q.Stream == "intake" || q.Stream == "intake:bulk" || strings.HasPrefix(q.Stream, "lane:")
	switch {
	case grouped:
		lag, pending := q.Lag, q.Pending
		if lag >= 0 {
			out.Lag = &lag
		}
		out.Pending = &pending
		if !q.OldestPending.IsZero() {
			at, age := q.OldestPending.UTC(), now.Sub(q.OldestPending).Seconds()
			out.OldestPendingAt, out.OldestPendingAgeSeconds = &at, &age
		}
	case q.Stream == "delayed":
		due := q.DueNow
		out.DueNow = &due
		if !q.NextDue.IsZero() {
			next := q.NextDue.UTC()
			out.NextDue = &next
		}
		sched := q.Scheduled
		out.Scheduled = &sched
		if !q.NextSendAt.IsZero() {
			next := q.NextSendAt.UTC()
			out.NextSendAt = &next
		}
	}
	return out
}

// upstreamStatus adds the consumer groups of every shard's record streams to rep.
func (s *Inspector) upstreamStatus(ctx context.Context, rep *StatusReport) error {
	rep.UpstreamGroups = []stream.UpstreamGroup{}
	for shard := range s.Shards() {
		g, err := s.ks.UpstreamGroups(ctx, shard)
		if err != nil {
			return err
		}
		rep.UpstreamGroups = append(rep.UpstreamGroups, g...)
	}
	return nil
}
