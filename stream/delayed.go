package stream

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

var (
	//go:embed to_delayed.lua
	toDelayedLua    string
	toDelayedScript = redis.NewScript(withLib(takeLua+campLua, toDelayedLua))

	//go:embed to_scheduled.lua
	toScheduledLua    string
	toScheduledScript = redis.NewScript(withLib(takeLua+windowLua, toScheduledLua))

	//go:embed promote.lua
	promoteLua    string
	promoteScript = redis.NewScript(withLib(takeLua, promoteLua))
)

// RetryRecord is a job to retry later.
type RetryRecord struct {
	ID, Provider, Recipient string
	// Due is when the retry may be sent.
	Due time.Time
	// Attempt is the number of the next attempt (the first send was attempt 0).
	Attempt int
	// Job is the lane entry's job: the whole job, or, for a campaign's recipient, its
	// reference (Campaign names the campaign whose message completes it); the promoter writes
	// both back. DeadJob is the whole job, for the dead record a cap makes (Job when empty).
	Job, Campaign, DeadJob string
	// Redelivered says the entry was read before (Entry.Redelivered): the entry the promoter
	// writes back says so too, and its lane looks whether its job was sent.
	Redelivered  bool
	EnqueuedAtMs int64
	// MaxDelayed caps the retries of the provider in the delayed set of the shard (those after
	// an attempt: a put-back, with no Code, neither counts nor is refused), so that one
	// provider's retries cannot push out another's; MaxPerRecipient caps the jobs of one
	// recipient in it; 0 means no cap. Past a cap the job goes to the dead stream.
	MaxDelayed      int64
	MaxPerRecipient int64
	// Code is the retryable code of the attempt that failed; it becomes the dead record's
	// code when a cap refuses the retry (CodeRetryRefused when empty). Empty for a put-back,
	// which made no attempt.
	Code string
	// Detail is that attempt's detail (the provider's words, as the ledger keeps them), cut to
	// MaxDetail. Code and Detail are kept with the waiting retry (last_code, last_detail in
	// its delayed data) for `gateway-worker inspect`; the promoter and lanes ignore them.
	Detail string
	// At is the time of the decision, the dead record's "at" (Options.Now when zero).
	At time.Time
	// Class is the job's class: the promoter writes a bulk job back to its provider's bulk
	// lane. Empty is transactional.
	Class job.Class
}

// RetryVerdict is what ToDelayed did.
type RetryVerdict int

const (
	// NotOwner: the entry is no longer pending for this consumer; nothing changed.
	NotOwner RetryVerdict = iota
	// Queued: the job waits in the delayed set.
	Queued
	// DeadGlobalCap: the delayed set was full for the job's provider (MaxDelayed of its
	// retries waited); the job went to the dead stream.
	DeadGlobalCap
	// DeadRecipientCap: the recipient had too many jobs waiting; the job went to the dead stream.
	DeadRecipientCap
	// AckedCopy: a copy of this job was already waiting to retry; this one was acknowledged with
	// no record of its own (the waiting copy is the job, and will have the record).
	AckedCopy
)

func (v RetryVerdict) String() string {
	switch v {
	case NotOwner:
		return "not owner"
	case Queued:
		return "queued"
	case DeadGlobalCap:
		return "dead: delayed set full"
	case DeadRecipientCap:
		return "dead: recipient cap"
	case AckedCopy:
		return "acknowledged: a copy waits to retry"
	}
	return fmt.Sprintf("RetryVerdict(%d)", int(v))
}

// ToDelayed moves a lane entry to the delayed set, due at r.Due, or to the dead stream when a
// cap refuses it (the dead record's reason names the cap, and the provider for a full set). Dead records of refused retries
// carry attempt r.Attempt-1, the attempt that failed.
func (s *Store) ToDelayed(ctx context.Context, e Entry, r RetryRecord) (RetryVerdict, error) {
	k := s.Keys(e.Shard)
	code := r.Code
	if code == "" {
		code = CodeRetryRefused
	}
	at := r.At
	if at.IsZero() {
		at = s.o.Now()
	}
	detail := r.Detail
	if len(detail) > MaxDetail {
		detail = detail[:MaxDetail] + "..."
	}
	n, err := s.eval(ctx, toDelayedScript,
		[]string{e.Stream, k.Delayed, k.DelayedData, k.Rcpt, k.Dead, k.Jobs, k.DelayedCount},
		Group, e.ID, s.o.Consumer, r.ID, r.Provider, r.Recipient, ms(r.Due), r.Attempt, r.Job,
		r.EnqueuedAtMs, r.MaxDelayed, r.MaxPerRecipient, ms(at), code, s.o.DeadMaxLen,
		r.Code, detail, bulkArg(r.Class), r.Campaign, boolArg(r.Redelivered), cmp.Or(r.DeadJob, r.Job),
	)
	if err != nil {
		return NotOwner, fmt.Errorf("stream: to delayed: %w", err)
	}
	return RetryVerdict(n), nil
}

// PromoteDue moves up to limit members of shard's delayed set that are due at now back to
// their lane as new entries, keeping attempt and enqueued_at. It is one atomic script, safe to
// run on every replica.
func (s *Store) PromoteDue(ctx context.Context, shard int, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	k := s.Keys(shard)
	n, err := promoteScript.Run(ctx, s.c,
		[]string{k.Delayed, k.DelayedData, k.Rcpt, k.Dead, k.Jobs, k.DelayedCount, k.Scheduled},
		ms(now), limit, k.LanePrefix, Group, s.o.DeadMaxLen,
	).Int64()
	if err != nil {
		return 0, fmt.Errorf("stream: promote: %w", err)
	}
	return int(n), nil
}

// ScheduledRecord is a job from the intake whose send_at is still to come.
type ScheduledRecord struct {
	ID, Provider string
	Class        job.Class
	Job          string
	EnqueuedAtMs int64
	// SendAt is when the job is due: the promoter writes it to its class's lane then.
	SendAt time.Time
	// At is the time of the decision, the delayed data's queued_at (Options.Now when zero).
	At time.Time
}

// ToScheduled moves an intake entry to the delayed set, due at r.SendAt with attempt 0, unless
// a job with its id is held or was accepted within the window (Copy: acknowledged with no
// record). A scheduled job is neither counted nor refused by the delayed set's caps
// (RetryRecord.MaxDelayed, MaxPerRecipient): they bound retries.
func (s *Store) ToScheduled(ctx context.Context, e Entry, r ScheduledRecord) (LaneVerdict, error) {
	k := s.Keys(e.Shard)
	at := r.At
	if at.IsZero() {
		at = s.o.Now()
	}
	n, err := s.eval(ctx, toScheduledScript,
		[]string{e.Stream, k.Jobs, k.Window, k.Delayed, k.DelayedData, k.Scheduled},
		Group, s.o.Consumer, s.windowTTL(), e.ID, r.Job, r.Provider, r.EnqueuedAtMs, r.ID, windowField(r.ID),
		ms(r.SendAt), bulkArg(r.Class), ms(at),
	)
	if err != nil {
		return LaneNotOwner, fmt.Errorf("stream: to scheduled: %w", err)
	}
	return LaneVerdict(n), nil
}
