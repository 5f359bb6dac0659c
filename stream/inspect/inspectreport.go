package inspect

import (
	"context"
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

// InspectDead is a dead record of the job without the job (which carries the subscription):
// `dead show` prints the whole record.
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
	return rep.report(s.o.Prefix, scanLimit, alive), nil
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
