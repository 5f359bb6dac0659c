package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// Campaigns as `gateway-worker campaign status` and `campaign ls` print them.

// writeCampaignStatus writes st as `campaign status` prints it, at now.
func writeCampaignStatus(w io.Writer, st *inspect.CampaignStatus, now time.Time) {
	fmt.Fprintf(w, "campaign %s: %s, %s, %s", st.ID, cli.Dash(st.State), cli.Dash(st.Class), reportPace(st.Rate))
	if st.SendAt != nil {
		fmt.Fprintf(w, ", send_at %s (%s)", st.SendAt.UTC().Format(time.RFC3339), reportWhen(*st.SendAt, now))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "added\t%d\n", st.Added)
	fmt.Fprintf(tw, "queued\t%d\twaiting for their provider's lane%s\n", st.Queued, reportCounts(st.QueuedBy))
	fmt.Fprintf(tw, "in lanes\t%d\tin a lane, in flight or waiting to retry\n", st.InLanes)
	fmt.Fprintf(tw, "done\t%d\twith their terminal record%s\n", st.Done, reportCounts(st.Finished))
	_ = tw.Flush()
	if !st.Created.IsZero() {
		fmt.Fprintf(w, "created %s (%s)", st.Created.UTC().Format(time.RFC3339), reportWhen(st.Created, now))
		if st.Started != nil {
			fmt.Fprintf(w, ", first recipient in a lane %s", reportWhen(*st.Started, now))
		}
		fmt.Fprintln(w)
	}
	switch rest := st.Queued + st.InLanes; {
	case !st.HasMessage:
		fmt.Fprintln(w, "not created yet: its recipients wait for its create entry")
	case rest == 0:
		fmt.Fprintln(w, "left: nothing (every recipient added has its record)")
	case st.Left != nil:
		fmt.Fprintf(w, "left: about %s for %d recipients\n", reportDuration(*st.Left), rest)
	default:
		fmt.Fprintf(w, "left: %d recipients, no estimate (%s)\n", rest, map[bool]string{true: "none sent yet", false: "not running"}[st.State == stream.CampaignRunning])
	}
}

// writeCampaignList writes list as `campaign ls` prints it.
func writeCampaignList(w io.Writer, list []inspect.CampaignStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAMPAIGN\tSTATE\tCLASS\tADDED\tQUEUED\tIN LANES\tDONE")
	for _, st := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", st.ID, cli.Dash(st.State), cli.Dash(st.Class), st.Added, st.Queued, st.InLanes, st.Done)
	}
	_ = tw.Flush()
}

// reportCounts is ": a 3, b 1" of m, the largest first; "" when m is empty.
func reportCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = cli.Dash(k) + " " + strconv.FormatInt(m[k], 10)
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

func reportPace(rate float64) string {
	if rate <= 0 {
		return "no pace"
	}
	return "paced at " + strconv.FormatFloat(rate, 'f', -1, 64) + "/s"
}
