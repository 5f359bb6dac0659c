package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// Campaigns as an operator reads them (`gateway-worker campaign status` and `campaign ls`,
// whose --json prints the statuses as they are), and what became of a campaign's create entry.

// CampaignList is the status of every campaign of every shard, by id. It reads each
// campaign's hash on every shard: an operator's listing, not something to poll.
func (s *Inspector) CampaignList(ctx context.Context, now time.Time) ([]CampaignStatus, error) {
	ids, err := s.CampaignIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]CampaignStatus, 0, len(ids))
	for _, id := range ids {
		st, err := s.Campaign(ctx, id, now)
		if err != nil {
			return nil, err
		}
		out = append(out, *st)
	}
	return out, nil
}

// CampaignRefusal is the reason of the dead record a worker wrote for a create entry of
// campaign id at or after since (by Redis's clock), "" when there is none: the create was
// refused (a vapid_key no worker has, a send_at past the horizon, another campaign with the
// id). Only the records written since then are read.
func (s *Inspector) CampaignRefusal(ctx context.Context, id string, since time.Time) (string, error) {
	dead, err := s.DeadList(ctx, DeadFilter{Since: since}, 0)
	if err != nil {
		return "", err
	}
	for _, d := range dead {
		if d.ID == id && job.KindOf(d.Job) == job.KindCreateCampaign {
			return d.Reason, nil
		}
	}
	return "", nil
}

// AwaitCampaign waits up to wait for a worker to take the create entry of campaign id written
// at since (by Redis's clock): the campaign's status once it is created, or the reason of the
// entry's dead record once it was refused; neither when wait ran out first.
func (s *Inspector) AwaitCampaign(ctx context.Context, id string, since time.Time, wait time.Duration) (*CampaignStatus, string, error) {
	deadline := time.Now().Add(wait)
	for {
		st, err := s.Campaign(ctx, id, time.Now())
		if err == nil && st.HasMessage {
			return st, "", nil
		}
		if err != nil && !errors.Is(err, ErrNoCampaign) {
			return nil, "", err
		}
		if reason, err := s.CampaignRefusal(ctx, id, since); err != nil || reason != "" {
			return nil, reason, err
		}
		if !time.Now().Before(deadline) {
			return nil, "", nil
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}

// WriteCampaignStatus writes st as `campaign status` prints it, at now.
func WriteCampaignStatus(w io.Writer, st *CampaignStatus, now time.Time) {
	fmt.Fprintf(w, "campaign %s: %s, %s, %s", st.ID, reportText(st.State), reportText(st.Class), reportPace(st.Rate))
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
		fmt.Fprintf(w, "left: %d recipients, no estimate (%s)\n", rest, map[bool]string{true: "none sent yet", false: "not running"}[st.State == CampaignRunning])
	}
}

// WriteCampaignList writes list as `campaign ls` prints it.
func WriteCampaignList(w io.Writer, list []CampaignStatus) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAMPAIGN\tSTATE\tCLASS\tADDED\tQUEUED\tIN LANES\tDONE")
	for _, st := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", st.ID, reportText(st.State), reportText(st.Class), st.Added, st.Queued, st.InLanes, st.Done)
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
		parts[i] = reportText(k) + " " + strconv.FormatInt(m[k], 10)
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
