package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// statusReport is what `status` shows; --json prints it as it is.
type statusReport struct {
	Prefix string        `json:"prefix"`
	Shards int           `json:"shards"`
	At     time.Time     `json:"at"`
	Queues []queueStatus `json:"queues"`
	// LeftShards are the shards beyond Shards whose intake, lanes or delayed set still hold
	// jobs (a shrink of the shard count left them, until drained); their queues are in Queues,
	// after those of the shards in use.
	LeftShards []int          `json:"left_shards"`
	Replicas   []replicaState `json:"replicas"`
	// StaleAfterSeconds is the heartbeat age past which a replica no longer counts as live.
	StaleAfterSeconds float64       `json:"stale_after_seconds"`
	Paused            []pauseStatus `json:"paused"`
	Memory            []nodeMemory  `json:"memory"`
}

// queueStatus is one stream or set of a shard. Lag and the pending fields are only for the
// grouped streams (intake, lanes); DueNow and NextDue only for the delayed set.
type queueStatus struct {
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
}

type replicaState struct {
	Consumer       string            `json:"consumer"`
	LastSeen       time.Time         `json:"last_seen"`
	LastSeenAgoSec float64           `json:"last_seen_seconds_ago"`
	Version        string            `json:"version,omitempty"`
	Breakers       map[string]string `json:"breakers"`
}

type pauseStatus struct {
	Provider string    `json:"provider"`
	Reason   string    `json:"reason,omitempty"`
	By       string    `json:"by,omitempty"`
	At       time.Time `json:"at"`
}

type nodeMemory struct {
	Node      string `json:"node,omitempty"`
	Role      string `json:"role,omitempty"`
	UsedBytes int64  `json:"used_memory"`
	PeakBytes int64  `json:"used_memory_peak"`
	MaxBytes  int64  `json:"maxmemory"`
	Policy    string `json:"maxmemory_policy"`
}

func cmdStatus(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	rf.registerRegistry(fs, "Fleet", "whose heartbeat.stale_after says which replicas are live")
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print one JSON object (snake_case keys) instead of tables")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	st, reg, code := rf.openWithRegistry(ctx, fs, "gateway-status", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	rep, err := readStatus(ctx, st, rf.prefix, reg.Heartbeat().StaleAfter, time.Now())
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	if *asJSON {
		return printJSON(fs, stdout, stderr, rep)
	}
	printStatus(stdout, rep)
	return cli.ExitOK
}

// readStatus reads everything status shows, at now.
func readStatus(ctx context.Context, st *stream.Inspector, prefix string, staleAfter time.Duration, now time.Time) (statusReport, error) {
	rep := statusReport{Prefix: prefix, Shards: st.Shards(), At: now.UTC(), StaleAfterSeconds: staleAfter.Seconds(),
		Queues: []queueStatus{}, Replicas: []replicaState{}, Paused: []pauseStatus{}, Memory: []nodeMemory{}}
	lanes, err := st.AllLanes(ctx)
	if err != nil {
		return rep, err
	}
	for shard := range st.Shards() {
		stats, err := st.QueueStats(ctx, shard, lanes[shard], now)
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
	beyond, err := st.LeftShards(ctx)
	if err != nil {
		return rep, err
	}
	for shard := range lanes {
		if shard >= st.Shards() && !slices.Contains(beyond, shard) {
			beyond = append(beyond, shard)
		}
	}
	slices.Sort(beyond)
	for _, shard := range beyond {
		stats, err := st.QueueStats(ctx, shard, lanes[shard], now)
		if err != nil {
			return rep, err
		}
		var jobs int64
		for _, q := range stats {
			if q.Stream == "intake" || q.Stream == "delayed" || strings.HasPrefix(q.Stream, "lane:") {
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
	replicas, err := st.Replicas(ctx, now, staleAfter)
	if err != nil {
		return rep, err
	}
	for _, r := range replicas {
		var state struct {
			Version  string            `json:"version"`
			Breakers map[string]string `json:"breakers"`
		}
		_ = json.Unmarshal(r.State, &state) // a replica that published no state shows none
		if state.Breakers == nil {
			state.Breakers = map[string]string{}
		}
		rep.Replicas = append(rep.Replicas, replicaState{
			Consumer: r.Consumer, LastSeen: r.LastSeen.UTC(), LastSeenAgoSec: now.Sub(r.LastSeen).Seconds(),
			Version: state.Version, Breakers: state.Breakers,
		})
	}
	pauses, err := st.Pauses(ctx)
	if err != nil {
		return rep, err
	}
	for _, p := range pauses {
		rep.Paused = append(rep.Paused, pauseStatus{Provider: p.Provider, Reason: p.Reason, By: p.By, At: p.At.UTC()})
	}
	mem, err := st.Memory(ctx)
	if err != nil {
		return rep, err
	}
	for _, m := range mem {
		rep.Memory = append(rep.Memory, nodeMemory{Node: m.Addr, Role: m.Role, UsedBytes: m.UsedMemory,
			PeakBytes: m.PeakMemory, MaxBytes: m.MaxMemory, Policy: m.Policy})
	}
	return rep, nil
}

func queueOf(q stream.QueueStat, now time.Time) queueStatus {
	out := queueStatus{Shard: q.Shard, Stream: q.Stream, Key: q.Key, Length: q.Entries}
	grouped := q.Stream == "intake" || strings.HasPrefix(q.Stream, "lane:")
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
	}
	return out
}

func printStatus(w io.Writer, rep statusReport) {
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
			oldest = age(*q.OldestPendingAgeSeconds) + " ago"
		}
		if q.DueNow != nil {
			retries = fmt.Sprintf("%d due now", *q.DueNow)
			if q.NextDue != nil {
				retries += ", next " + relative(*q.NextDue, rep.At)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", q.Shard, dash(q.Stream), q.Length, lag, pending, oldest, retries)
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
			fmt.Fprintf(tw, "%s\t%s ago\t%s\t%s\n", dash(r.Consumer), age(r.LastSeenAgoSec), dash(r.Version), breakers(r.Breakers))
		}
		_ = tw.Flush()
	}

	if len(rep.Paused) == 0 {
		fmt.Fprintln(w, "\npaused providers: none")
	} else {
		fmt.Fprintf(w, "\npaused providers: %d (their lanes read nothing; `gateway-worker resume PROVIDER` ends a pause)\n", len(rep.Paused))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PROVIDER\tSINCE\tBY\tREASON")
		for _, p := range rep.Paused {
			fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%s\n", dash(p.Provider), p.At.Format(time.RFC3339), relative(p.At, rep.At), dash(p.By), dash(p.Reason))
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w, "\nredis memory")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tUSED\tPEAK\tMAXMEMORY\tPOLICY")
	for _, m := range rep.Memory {
		limit := "no limit"
		if m.MaxBytes > 0 {
			limit = fmt.Sprintf("%s (%.0f%% used)", bytesText(m.MaxBytes), 100*float64(m.UsedBytes)/float64(m.MaxBytes))
		}
		policy := m.Policy
		if policy != "noeviction" {
			policy += " (the gateway needs noeviction: docs/operations.md)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(m.Node), dash(m.Role), bytesText(m.UsedBytes), bytesText(m.PeakBytes), limit, policy)
	}
	_ = tw.Flush()
}

// breakers lists a replica's breaker states, the ones not closed first.
func breakers(m map[string]string) string {
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
		parts[i] = dash(id) + "=" + dash(m[id])
	}
	return strings.Join(parts, " ")
}

// age is a number of seconds for a person: 0.4s, 12s, 3m12s, 2h5m.
func age(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// relative says when t is from now: "in 4m12s" or "3m ago".
func relative(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + age(d.Seconds())
	}
	return age(now.Sub(t).Seconds()) + " ago"
}

func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// dash is how a table prints text read from Redis: "-" for none, and a text that holds
// anything but printable characters (a newline, an escape sequence, invalid UTF-8: written by
// something other than the gateway's commands, which refuse them) quoted with it escaped, so it
// cannot forge a row or drive the terminal.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}
