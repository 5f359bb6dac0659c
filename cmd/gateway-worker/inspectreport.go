package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// writeInspect writes r as `gateway-worker inspect` prints it at now: every place the job was
// found, each entry's consumer and whether it is alive, its retry or its send_at, its records,
// and which scans were cut short.
func writeInspect(w io.Writer, r inspect.InspectReport, now time.Time) {
	fmt.Fprintf(w, "job %s: shard %d of prefix %s\n", r.ID, r.Shard, r.Prefix)
	if !r.Found {
		fmt.Fprintf(w, "  not found: never enqueued under this prefix, or its records were trimmed\n")
	}
	pending := func(p *inspect.InspectPending) string {
		if p == nil {
			return "not read by any consumer yet"
		}
		state := "alive"
		if !p.ConsumerAlive {
			state = "not alive: another worker reclaims it after --visibility-timeout"
		}
		return fmt.Sprintf("read by consumer %s (%s), last delivered %s ago, %d deliveries", p.Consumer, state, reportAge(p.IdleSeconds), p.Deliveries)
	}
	for _, p := range r.Intake {
		fmt.Fprintf(w, "  in the intake, not routed yet: %s entry %s, %s\n", p.Key, p.EntryID, pending(p.Pending))
	}
	if p := r.Lane; p != nil {
		what := "waiting in its lane"
		if p.Pending != nil {
			what = "in flight"
		}
		fmt.Fprintf(w, "  %s: %s entry %s, attempt %d, %s\n", what, p.Key, p.EntryID, p.Attempt, pending(p.Pending))
	} else if r.HeldBy != "" && r.Delayed == nil {
		fmt.Fprintf(w, "  held for provider %s (the jobs index) but its lane entry was not among the entries read\n", r.HeldBy)
	}
	if d := r.Delayed; d != nil && d.Scheduled {
		fmt.Fprintf(w, "  scheduled: waiting for its send_at %s (%s), then sent on %s (its ttl counts from then)\n", d.Due.Format(time.RFC3339), reportWhen(d.Due, now), d.Provider)
	} else if d != nil {
		fmt.Fprintf(w, "  waiting to retry: due %s (%s) as attempt %d on %s\n", d.Due.Format(time.RFC3339), reportWhen(d.Due, now), d.Attempt, d.Provider)
		switch {
		case d.LastCode != "":
			last := d.LastCode
			if d.LastDetail != "" {
				last += ": " + d.LastDetail
			}
			fmt.Fprintf(w, "    last attempt (%d): %s\n", d.Attempt-1, last)
		default:
			fmt.Fprintf(w, "    put back without an attempt (its breaker, its host's limits or a share refused it), or queued by an older worker\n")
		}
		if d.Recipient != "" {
			fmt.Fprintf(w, "    recipient %s\n", d.Recipient)
		}
	}
	for _, l := range r.Results {
		status := ""
		if l.Status != 0 {
			status = fmt.Sprintf(" (HTTP %d)", l.Status)
		}
		fmt.Fprintf(w, "  ended: %s%s on %s at attempt %d (0 is the first), %s; ledger entry %s\n",
			l.Code, status, cli.Dash(l.Provider), l.Attempt, l.At.Format(time.RFC3339), l.EntryID)
		if l.Detail != "" {
			fmt.Fprintf(w, "    detail: %s\n", l.Detail)
		}
	}
	for _, d := range r.Dead {
		where := "at the intake"
		if d.Provider != "" {
			where = fmt.Sprintf("on %s at attempt %d", d.Provider, d.Attempt)
		}
		fmt.Fprintf(w, "  dead-lettered: %s %s, %s; dead entry %s (gateway-worker dead show %s)\n",
			d.Code, where, d.At.Format(time.RFC3339), d.EntryID, d.EntryID)
		fmt.Fprintf(w, "    reason: %s\n", d.Reason)
		if d.Note != "" {
			fmt.Fprintf(w, "    note: %s\n", d.Note)
		}
	}
	if r.SentMark {
		fmt.Fprintf(w, "  sent mark set: accepted within the sent-mark window; a copy enqueued now is acknowledged unsent\n")
	}
	if len(r.ScanCut) > 0 {
		fmt.Fprintf(w, "  scan cut: only %d entries of %s were read (--scan-limit; the intake and lanes oldest first, the ledger and dead stream newest first): the job may be in the rest\n",
			r.ScanLimit, strings.Join(r.ScanCut, ", "))
	}
}
