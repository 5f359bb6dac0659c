package stream

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
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
	UpstreamGroups []UpstreamGroup `json:"upstream_groups"`
}

// KeyParkStatus is a parked sender (KeyPark).
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

// ReplicaStatus is a live replica and the state it published (WorkerState).
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
	rep := StatusReport{Prefix: orDefaultPrefix(s.o.Prefix), Shards: s.Shards(), At: now.UTC(), StaleAfterSeconds: staleAfter.Seconds(),
		Queues: []QueueStatus{}, Replicas: []ReplicaStatus{}, Paused: []PauseStatus{}, KeyParks: []KeyParkStatus{}, Memory: []MemoryStatus{}}
	lanes, err := s.AllLanes(ctx)
	if err != nil {
		return rep, err
	}
	for shard := range s.Shards() {
		stats, err := s.QueueStats(ctx, shard, lanes[shard], now)
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
		stats, err := s.QueueStats(ctx, shard, lanes[shard], now)
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
	parks, err := s.KeyParks(ctx, now)
	if err != nil {
		return rep, err
	}
	for _, p := range parks {
		rep.KeyParks = append(rep.KeyParks, KeyParkStatus{Provider: p.Provider, Key: p.Key, Until: p.Until.UTC(),
			UntilSeconds: p.Until.Sub(now).Seconds(), Reason: p.Reason, By: p.By})
	}
	mem, err := s.Memory(ctx)
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

func queueOf(q QueueStat, now time.Time) QueueStatus {
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

// WriteStatus writes rep as `gateway-worker status` prints it: the queues, the live replicas
// and their proxies, the pauses, the parked keys, Redis's memory, the upstreams' consumer
// groups, and a warning for each setting of a node the gateway's promises need and it lacks.
func WriteStatus(w io.Writer, rep StatusReport) {
	writeStatusTables(w, rep)
	writeUpstreamGroups(w, rep)
	writeRedisWarnings(w, rep)
}

// writeStatusTables writes the status's tables: the queues (and the shards a shrink left), the
// replicas and their proxies, the pauses, the parked keys and Redis's memory.
func writeStatusTables(w io.Writer, rep StatusReport) {
	fmt.Fprintf(w, "prefix %s, %d shard(s), at %s\n\n", rep.Prefix, rep.Shards, rep.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTREAM\tLENGTH\tLAG\tPENDING\tOLDEST PENDING\tRETRIES")
	noGroup := false
	for _, q := range rep.Queues {
		lag, pending, oldest, retries := "-", "-", "-", ""
		if q.Lag != nil {
			lag = fmt.Sprint(*q.Lag)
		} else if q.Pending != nil {
			lag, noGroup = "?", true // a stream without the gateway's group: no worker has read it yet
		}
		if q.Pending != nil {
			pending = fmt.Sprint(*q.Pending)
		}
		if q.OldestPendingAgeSeconds != nil {
			oldest = reportAge(*q.OldestPendingAgeSeconds) + " ago"
		}
		if q.DueNow != nil {
			retries = fmt.Sprintf("%d due now", *q.DueNow)
			if q.NextDue != nil {
				retries += ", next " + reportWhen(*q.NextDue, rep.At)
			}
			if q.Scheduled != nil && *q.Scheduled > 0 {
				retries += fmt.Sprintf("; %d scheduled", *q.Scheduled)
				if q.NextSendAt != nil {
					retries += ", next send_at " + reportWhen(*q.NextSendAt, rep.At)
				}
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", q.Shard, reportText(q.Stream), q.Length, lag, pending, oldest, retries)
	}
	_ = tw.Flush()
	if noGroup {
		fmt.Fprintln(w, "LAG ?: no worker has read that stream yet (it has no consumer group): every entry waits")
	}
	if len(rep.LeftShards) > 0 {
		fmt.Fprintf(w, "shards %v are beyond the %d in use and still hold jobs (a larger shard count wrote them): only workers run with --reshard-from read them (docs/operations.md, \"Changing the shard count\")\n",
			rep.LeftShards, rep.Shards)
	}

	fmt.Fprintf(w, "\nreplicas: %d live (heartbeat within %s)\n", len(rep.Replicas), time.Duration(rep.StaleAfterSeconds*float64(time.Second)))
	if len(rep.Replicas) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CONSUMER\tLAST SEEN\tVERSION\tBREAKERS")
		for _, r := range rep.Replicas {
			fmt.Fprintf(tw, "%s\t%s ago\t%s\t%s\n", reportText(r.Consumer), reportAge(r.LastSeenAgoSec), reportText(r.Version), reportBreakers(r.Breakers))
		}
		_ = tw.Flush()
		writeProxies(w, rep.Replicas)
	}

	if len(rep.Paused) == 0 {
		fmt.Fprintln(w, "\npaused providers: none")
	} else {
		fmt.Fprintf(w, "\npaused providers: %d (their lanes read nothing; `gateway-worker resume PROVIDER` ends a pause)\n", len(rep.Paused))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PROVIDER\tSINCE\tBY\tREASON")
		for _, p := range rep.Paused {
			fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%s\n", reportText(p.Provider), p.At.Format(time.RFC3339), reportWhen(p.At, rep.At), reportText(p.By), reportText(p.Reason))
		}
		_ = tw.Flush()
	}

	if len(rep.KeyParks) == 0 {
		fmt.Fprintln(w, "\nparked keys: none")
	} else {
		fmt.Fprintf(w, "\nparked keys: %d (a push service throttled the sender; its jobs on that provider wait in the delayed set until then)\n", len(rep.KeyParks))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PROVIDER\tKEY\tUNTIL\tBY\tREASON")
		for _, p := range rep.KeyParks {
			fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\t%s\n", reportText(p.Provider), reportText(p.Key), p.Until.Format(time.RFC3339), reportWhen(p.Until, rep.At), reportText(p.By), reportText(p.Reason))
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w, "\nredis memory")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tUSED\tPEAK\tMAXMEMORY\tPOLICY")
	for _, m := range rep.Memory {
		limit := "no limit"
		if m.MaxBytes > 0 {
			limit = fmt.Sprintf("%s (%.0f%% used)", reportBytes(m.MaxBytes), 100*float64(m.UsedBytes)/float64(m.MaxBytes))
		}
		policy := m.Policy
		if policy != "noeviction" {
			policy += " (the gateway needs noeviction: docs/operations.md)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", reportText(m.Node), reportText(m.Role), reportBytes(m.UsedBytes), reportBytes(m.PeakBytes), limit, policy)
	}
	_ = tw.Flush()
}

// writeUpstreamGroups writes the consumer groups upstreams read the record streams with: a
// group that stops reading keeps its stream from being trimmed (docs/runbooks.md,
// WebPushUpstreamGroupLagGrowing).
func writeUpstreamGroups(w io.Writer, rep StatusReport) {
	if len(rep.UpstreamGroups) == 0 {
		fmt.Fprintln(w, "\nupstream consumer groups: none on the ledger, gone or dead streams")
		return
	}
	fmt.Fprintf(w, "\nupstream consumer groups: %d (what a group has not read and acknowledged is never trimmed)\n", len(rep.UpstreamGroups))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tSTREAM\tGROUP\tLAG\tPENDING")
	estimated := false
	for _, g := range rep.UpstreamGroups {
		lag := fmt.Sprint(g.Lag)
		if g.Estimated {
			lag, estimated = "~"+lag, true
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\n", g.Shard, g.Stream, reportText(g.Group), lag, g.Pending)
	}
	_ = tw.Flush()
	if estimated {
		fmt.Fprintln(w, "LAG ~: estimated: Redis cannot count it (entries were deleted past the group); entries added minus entries read, at most the length")
	}
}

// writeRedisWarnings says what of Redis's settings the gateway's promises need and a node
// lacks: AOF (without it a restart loses what was written since the last snapshot) and a
// maxmemory (without it Redis grows until the kernel kills it).
func writeRedisWarnings(w io.Writer, rep StatusReport) {
	for _, m := range rep.Memory {
		node := reportText(m.Node)
		if !m.AOF {
			fmt.Fprintf(w, "warning: redis %s: AOF is off (appendonly no): a restart of Redis loses the jobs and records written since its last snapshot (docs/operations.md)\n", node)
		}
		if m.MaxBytes == 0 {
			fmt.Fprintf(w, "warning: redis %s: no maxmemory: Redis grows until the host runs out of memory instead of refusing writes (docs/runbooks.md, WebPushRedisNoMaxmemory)\n", node)
		}
	}
}

// writeProxies lists the egress proxies the live replicas send through: each proxy, its
// breaker on each replica, and the providers behind it. Nothing when every provider is direct.
func writeProxies(w io.Writer, replicas []ReplicaStatus) {
	type row struct{ consumer, proxy, state, providers string }
	var rows []row
	for _, r := range replicas {
		byProxy := map[string][]string{}
		for id, p := range r.Proxies {
			byProxy[p] = append(byProxy[p], id)
		}
		proxies := make([]string, 0, len(byProxy))
		for p := range byProxy {
			proxies = append(proxies, p)
		}
		sort.Strings(proxies)
		for _, p := range proxies {
			ids := byProxy[p]
			sort.Strings(ids)
			rows = append(rows, row{r.Consumer, p, reportText(r.ProxyBreakers[p]), strings.Join(ids, ",")})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\negress proxies (the providers not listed go direct)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tPROXY\tBREAKER\tPROVIDERS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", reportText(r.consumer), r.proxy, r.state, r.providers)
	}
	_ = tw.Flush()
}

// reportBreakers lists a replica's breaker states, the ones not closed first.
func reportBreakers(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		ci, cj := m[ids[i]] == "closed", m[ids[j]] == "closed"
		if ci != cj {
			return cj
		}
		return ids[i] < ids[j]
	})
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = reportText(id) + "=" + reportText(m[id])
	}
	return strings.Join(parts, " ")
}
