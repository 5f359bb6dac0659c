package stream

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// InspectReport is where a job is, as an operator reads it (`gateway-worker inspect`, whose
// --json prints it as it is).
type InspectReport struct {
	ID        string          `json:"id"`
	Prefix    string          `json:"prefix"`
	Shard     int             `json:"shard"`
	Found     bool            `json:"found"`
	HeldBy    string          `json:"held_by,omitempty"`
	SentMark  bool            `json:"sent_mark"`
	Intake    []InspectPlace  `json:"intake"`
	Lane      *InspectPlace   `json:"lane,omitempty"`
	Delayed   *InspectDelayed `json:"delayed,omitempty"`
	Results   []InspectLedger `json:"results"`
	Dead      []InspectDead   `json:"dead"`
	ScanLimit int             `json:"scan_limit"`
	ScanCut   []string        `json:"scan_cut"`
}

// InspectPlace is an entry of the intake or a lane holding the job.
type InspectPlace struct {
	Key     string          `json:"key"`
	EntryID string          `json:"entry_id"`
	Attempt int             `json:"attempt"`
	Pending *InspectPending `json:"pending,omitempty"`
}

// InspectPending is the consumer that read an entry, and whether it is alive.
type InspectPending struct {
	Consumer      string  `json:"consumer"`
	ConsumerAlive bool    `json:"consumer_alive"`
	IdleSeconds   float64 `json:"idle_seconds"`
	Deliveries    int64   `json:"deliveries"`
}

// InspectDelayed is the job's retry waiting in the delayed set.
type InspectDelayed struct {
	Due        time.Time  `json:"due"`
	Provider   string     `json:"provider"`
	Attempt    int        `json:"attempt"`
	Recipient  string     `json:"recipient,omitempty"`
	LastCode   string     `json:"last_code,omitempty"`
	LastDetail string     `json:"last_detail,omitempty"`
	QueuedAt   *time.Time `json:"queued_at,omitempty"`
	EnqueuedAt *time.Time `json:"enqueued_at,omitempty"`
	// Scheduled: the job waits for its send_at (due), never sent yet.
	Scheduled bool `json:"scheduled,omitempty"`
}

// InspectLedger is a ledger record of the job.
type InspectLedger struct {
	EntryID   string    `json:"entry_id"`
	Provider  string    `json:"provider"`
	Code      string    `json:"code"`
	Status    int       `json:"status"`
	Detail    string    `json:"detail"`
	Attempt   int       `json:"attempt"`
	LatencyMs int64     `json:"latency_ms"`
	At        time.Time `json:"at"`
}

// InspectDead is a dead record of the job without the job (which carries the subscription): `dead show`
// prints the whole record.
type InspectDead struct {
	EntryID  string    `json:"entry_id"`
	Code     string    `json:"code"`
	Reason   string    `json:"reason"`
	Provider string    `json:"provider"`
	Attempt  int       `json:"attempt"`
	From     string    `json:"from"`
	Entry    string    `json:"entry"`
	Note     string    `json:"note,omitempty"`
	At       time.Time `json:"at"`
}

// InspectReport finds job id (Inspect, reading at most scanLimit entries of each stream) and
// tells, for each entry read by a consumer, whether that consumer's heartbeat is at most
// staleAfter old at now.
func (s *Inspector) InspectReport(ctx context.Context, id string, scanLimit int, staleAfter time.Duration, now time.Time) (InspectReport, error) {
	rep, err := s.Inspect(ctx, id, scanLimit)
	if err != nil {
		return InspectReport{}, err
	}
	replicas, err := s.Replicas(ctx, now, staleAfter)
	if err != nil {
		return InspectReport{}, err
	}
	alive := map[string]bool{}
	for _, r := range replicas {
		alive[r.Consumer] = true
	}
	return rep.report(orDefaultPrefix(s.o.Prefix), scanLimit, alive), nil
}

func (rep JobReport) report(prefix string, scanLimit int, alive map[string]bool) InspectReport {
	place := func(p StreamPlace) InspectPlace {
		out := InspectPlace{Key: p.Key, EntryID: p.EntryID, Attempt: p.Attempt}
		if p.Pending != nil {
			out.Pending = &InspectPending{Consumer: p.Pending.Consumer, ConsumerAlive: alive[p.Pending.Consumer],
				IdleSeconds: p.Pending.Idle.Seconds(), Deliveries: p.Pending.Deliveries}
		}
		return out
	}
	out := InspectReport{ID: rep.ID, Prefix: prefix, Shard: rep.Shard, Found: rep.Found(), HeldBy: rep.Held, SentMark: rep.Sent,
		Intake: []InspectPlace{}, Results: []InspectLedger{}, Dead: []InspectDead{}, ScanLimit: scanLimit, ScanCut: rep.Cut}
	if out.ScanCut == nil {
		out.ScanCut = []string{}
	}
	for _, p := range rep.Intake {
		out.Intake = append(out.Intake, place(p))
	}
	if rep.Lane != nil {
		p := place(*rep.Lane)
		out.Lane = &p
	}
	if d := rep.Delayed; d != nil {
		out.Delayed = &InspectDelayed{Due: d.Due.UTC(), Provider: d.Provider, Attempt: d.Attempt, Recipient: d.Recipient,
			LastCode: d.LastCode, LastDetail: d.LastDetail, Scheduled: d.Scheduled}
		if !d.QueuedAt.IsZero() {
			t := d.QueuedAt.UTC()
			out.Delayed.QueuedAt = &t
		}
		if !d.EnqueuedAt.IsZero() {
			t := d.EnqueuedAt.UTC()
			out.Delayed.EnqueuedAt = &t
		}
	}
	for _, r := range rep.Results {
		out.Results = append(out.Results, InspectLedger{EntryID: r.EntryID, Provider: r.Provider, Code: r.Code, Status: r.Status,
			Detail: r.Detail, Attempt: r.Attempt, LatencyMs: r.Latency.Milliseconds(), At: r.At.UTC()})
	}
	for _, d := range rep.Dead {
		out.Dead = append(out.Dead, InspectDead{EntryID: d.EntryID, Code: d.Code, Reason: d.Reason, Provider: d.Provider,
			Attempt: d.Attempt, From: d.From, Entry: d.Entry, Note: d.Note, At: d.At.UTC()})
	}
	return out
}

// WriteInspect writes r as `gateway-worker inspect` prints it at now: every place the job was
// found, each entry's consumer and whether it is alive, its retry or its send_at, its records,
// and which scans were cut short.
func WriteInspect(w io.Writer, r InspectReport, now time.Time) {
	fmt.Fprintf(w, "job %s: shard %d of prefix %s\n", r.ID, r.Shard, r.Prefix)
	if !r.Found {
		fmt.Fprintf(w, "  not found: never enqueued under this prefix, or its records were trimmed\n")
	}
	pending := func(p *InspectPending) string {
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
			l.Code, status, reportText(l.Provider), l.Attempt, l.At.Format(time.RFC3339), l.EntryID)
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
