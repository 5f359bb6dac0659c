package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// writeStatus writes rep as `gateway-worker status` prints it: the queues, the live replicas
// and their proxies, the pauses, the parked keys, Redis's memory, the upstreams' consumer
// groups, and a warning for each setting of a node the gateway's promises need and it lacks.
func writeStatus(w io.Writer, rep inspect.StatusReport) {
	writeStatusTables(w, rep)
	writeUpstreamGroups(w, rep)
	writeRedisWarnings(w, rep)
}

// writeStatusTables writes the status's tables: the queues (and the shards a shrink left), the
// replicas and their proxies, the pauses, the parked keys and Redis's memory.
func writeStatusTables(w io.Writer, rep inspect.StatusReport) {
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
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", q.Shard, cli.Dash(q.Stream), q.Length, lag, pending, oldest, retries)
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
			fmt.Fprintf(tw, "%s\t%s ago\t%s\t%s\n", cli.Dash(r.Consumer), reportAge(r.LastSeenAgoSec), cli.Dash(r.Version), reportBreakers(r.Breakers))
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
			fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%s\n", cli.Dash(p.Provider), p.At.Format(time.RFC3339), reportWhen(p.At, rep.At), cli.Dash(p.By), cli.Dash(p.Reason))
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
			fmt.Fprintf(tw, "%s\t%s\t%s (%s)\t%s\t%s\n", cli.Dash(p.Provider), cli.Dash(p.Key), p.Until.Format(time.RFC3339), reportWhen(p.Until, rep.At), cli.Dash(p.By), cli.Dash(p.Reason))
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cli.Dash(m.Node), cli.Dash(m.Role), reportBytes(m.UsedBytes), reportBytes(m.PeakBytes), limit, policy)
	}
	_ = tw.Flush()
}

// writeUpstreamGroups writes the consumer groups upstreams read the record streams with: a
// group that stops reading keeps its stream from being trimmed (docs/runbooks.md,
// WebPushUpstreamGroupLagGrowing).
func writeUpstreamGroups(w io.Writer, rep inspect.StatusReport) {
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\n", g.Shard, g.Stream, cli.Dash(g.Group), lag, g.Pending)
	}
	_ = tw.Flush()
	if estimated {
		fmt.Fprintln(w, "LAG ~: estimated: Redis cannot count it (entries were deleted past the group); entries added minus entries read, at most the length")
	}
}

// writeRedisWarnings says what of Redis's settings the gateway's promises need and a node
// lacks: AOF (without it a restart loses what was written since the last snapshot) and a
// maxmemory (without it Redis grows until the kernel kills it).
func writeRedisWarnings(w io.Writer, rep inspect.StatusReport) {
	for _, m := range rep.Memory {
		node := cli.Dash(m.Node)
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
func writeProxies(w io.Writer, replicas []inspect.ReplicaStatus) {
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
			rows = append(rows, row{r.Consumer, p, cli.Dash(r.ProxyBreakers[p]), strings.Join(ids, ",")})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\negress proxies (the providers not listed go direct)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSUMER\tPROXY\tBREAKER\tPROVIDERS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cli.Dash(r.consumer), r.proxy, r.state, r.providers)
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
		parts[i] = cli.Dash(id) + "=" + cli.Dash(m[id])
	}
	return strings.Join(parts, " ")
}
