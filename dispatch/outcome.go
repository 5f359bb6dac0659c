package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// goneMeanwhile is the ledger detail of a retry dropped because its endpoint was reported gone
// after the job's first attempt.
const goneMeanwhile = "endpoint reported gone meanwhile; not retried"

// writeKind is which state change ends a lane entry's turn.
type writeKind int

const (
	// writeFinish records a terminal outcome (the ledger, and the gone stream or the sent mark
	// as the result asks).
	writeFinish writeKind = iota + 1
	// writeRetry moves the job to the delayed set: a retry, or a put-back with the same attempt.
	writeRetry
	// writeDead moves the job to the dead stream.
	writeDead
	// writeAckCopy acknowledges an entry whose job another attempt already recorded.
	writeAckCopy
)

// write is one state change of a lane entry, decided (beforeSend, afterSend, putBack) before the
// lane makes it (apply). Only the field of its kind is set.
type write struct {
	kind   writeKind
	result stream.Result      // writeFinish
	retry  stream.RetryRecord // writeRetry
	dead   stream.DeadRecord  // writeDead
}

// facts are what Redis said of an entry before its send: another attempt was accepted (its sent
// mark), its endpoint was reported gone.
type facts struct {
	sent, gone bool
}

// beforeSend decides whether an entry ends without a send, from parseLaneEntry's reason and the
// facts Redis gave, at now: an entry the gateway did not write, a copy of a job already
// accepted, a retry to an endpoint gone meanwhile, a job whose TTL ran out while it waited
// (checked before admission, so that jobs which ran out while the breaker was open cost no
// token and no probe), a key this replica does not have. nil means: go on to admission.
func (l *lane) beforeSend(lj *laneJob, reason string, f facts, now time.Time) *write {
	if reason != "" {
		return &write{kind: writeDead, dead: stream.DeadRecord{ID: bestEffortID(lj.raw), Code: string(taxonomy.InvalidJob),
			Reason: reason, Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: now}}
	}
	j := lj.job
	base := stream.Result{ID: j.ID, Provider: l.provider, Attempt: lj.attempt, At: now}
	switch {
	case f.sent:
		return &write{kind: writeAckCopy}
	case f.gone:
		base.Code, base.Detail = string(taxonomy.Gone), goneMeanwhile
		return &write{kind: writeFinish, result: base}
	}
	if r, ok := l.expired(lj, base, now); ok {
		return &write{kind: writeFinish, result: r}
	}
	if l.cfg.Keys[j.VAPIDKey] == nil {
		// Intake checked the name; this replica may run with other keys than the one that did.
		return &write{kind: writeDead, dead: stream.DeadRecord{ID: j.ID, Code: string(taxonomy.InvalidJob),
			Reason:  fmt.Sprintf("vapid_key: no key named %q is configured", j.VAPIDKey),
			Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: now}}
	}
	return nil
}

// expired is the EXPIRED record of a job whose TTL has run out at now, if it has. TTL 0 means
// "now or never" (RFC 8030 section 5.2): its first attempt goes out with TTL 0 however long it
// queued, since any queueing at all would otherwise expire every such job; it is never retried
// (Backoff.next gives EXPIRED for any delay).
func (l *lane) expired(lj *laneJob, base stream.Result, now time.Time) (stream.Result, bool) {
	j := lj.job
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(lj.enqueued)
	if remaining > 0 || (j.TTL == 0 && lj.attempt == 0) {
		return stream.Result{}, false
	}
	r := base
	r.Code, r.At = string(taxonomy.Expired), now
	r.Detail = fmt.Sprintf("ttl of %ds ran out in the queue before attempt %d; not sent", j.TTL, lj.attempt+1)
	return r, true
}

// afterSend decides where a job goes after an attempt whose outcome is out (r is its ledger
// record as far as the attempt goes): the ledger for a final outcome (with the sent mark, or
// the gone stream), the delayed set for a retry, dead when the retries are used up.
func (l *lane) afterSend(lj *laneJob, out taxonomy.Outcome, r stream.Result) write {
	cfg, j := l.cfg, lj.job
	switch {
	case out.Code == taxonomy.Accepted:
		r.Sent = true
	case out.Code == taxonomy.Gone || out.Code == taxonomy.KeyMismatch:
		// The upstream must delete or renew the subscription: the gone stream tells it which.
		// Only GONE marks the endpoint, which drops the retries queued for it: an endpoint that
		// answered KEY_MISMATCH is alive, and a job signed with the key it was made with (this
		// one's retry under another vapid_key, or another job) still goes through.
		r.Gone, r.Endpoint = true, j.Subscription.Endpoint
		r.MarkGone = out.Code == taxonomy.Gone
	case out.Code.Retryable():
		remaining := time.Duration(j.TTL)*time.Second - r.At.Sub(lj.enqueued)
		due, v := cfg.Backoff.next(r.At, lj.attempt, out.RetryAfter, remaining, cfg.Rand())
		switch v {
		case retriesExhausted:
			return write{kind: writeDead, result: r, dead: stream.DeadRecord{ID: j.ID, Code: string(out.Code),
				Reason:  fmt.Sprintf("gave up after %d attempts: %s", lj.attempt+1, describe(out)),
				Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: r.At}}
		case retryExpired:
			r.Code = string(taxonomy.Expired)
			r.Detail = fmt.Sprintf("ttl ends before attempt %d could be made; last attempt: %s", lj.attempt+2, describe(out))
		default:
			return write{kind: writeRetry, retry: stream.RetryRecord{
				ID: j.ID, Provider: l.provider, Recipient: j.Recipient, Due: due, Attempt: lj.attempt + 1,
				Job: lj.raw, EnqueuedAtMs: lj.enqueued.UnixMilli(),
				MaxDelayed: capArg(cfg.MaxDelayed), MaxPerRecipient: capArg(cfg.MaxPerRecipient),
				Code: string(out.Code), Detail: out.Detail, At: r.At,
			}}
		}
	}
	return write{kind: writeFinish, result: r}
}

// putBack is the write that returns an entry that may not start now (its provider's breaker,
// its host's limits, the retries' share or its recipient's cap refused it) to the delayed set,
// due at due, with the same attempt: nothing was tried. It passes no recipient and no caps: the
// job already takes room in Redis (in the lane), so moving it to the delayed set adds nothing
// the caps protect, and counting it as its recipient's retry would dead-letter that
// recipient's real retries at the cap.
func (l *lane) putBack(lj *laneJob, due, now time.Time) write {
	return write{kind: writeRetry, retry: stream.RetryRecord{
		ID: lj.job.ID, Provider: l.provider, Due: due, Attempt: lj.attempt,
		Job: lj.raw, EnqueuedAtMs: lj.enqueued.UnixMilli(), At: now,
	}}
}

// capArg is a cap as stream takes it: 0 for none, which Config spells as a negative number.
func capArg(n int64) int64 { return max(n, 0) }

// describe is an outcome for a reason text: code, status when there was one, and detail.
func describe(out taxonomy.Outcome) string {
	s := string(out.Code)
	if out.Status != 0 {
		s += " " + strconv.Itoa(out.Status)
	}
	if out.Detail != "" {
		s += ": " + out.Detail
	}
	return s
}

// apply makes the write w for entry e (of job lj): it retries Redis errors until the write goes
// through or ctx ends (recordContext bounds that at shutdown), keeping the shard's gate closed
// meanwhile. An outcome it could not write is logged, job by job: the replica that takes over
// the entry will send it again. It logs when another consumer owns the entry by now.
func (l *lane) apply(ctx context.Context, e stream.Entry, lj *laneJob, w write) {
	var (
		what, code string
		verdict    stream.RetryVerdict
		op         func(context.Context) (bool, error)
	)
	switch w.kind {
	case writeFinish:
		what, code = "finish", w.result.Code
		op = func(ctx context.Context) (bool, error) { return l.store.Finish(ctx, e, w.result) }
	case writeDead:
		what, code = "to dead", w.dead.Code
		attrs := []any{"shard", e.Shard, "provider", l.provider, "id", logID(w.dead.ID), "code", w.dead.Code,
			"attempt", w.dead.Attempt, "reason", w.dead.Reason}
		if w.result.ID != "" { // the last attempt's answer: retries exhausted
			attrs = append(attrs, "status", w.result.Status, "latency", w.result.Latency)
		}
		l.cfg.Logger.Info("dispatch: job dead-lettered", append(attrs, l.endpointHash(lj)...)...)
		op = func(ctx context.Context) (bool, error) { return l.store.ToDead(ctx, e, w.dead) }
	case writeRetry:
		what, code = "to delayed", w.retry.Code
		op = func(ctx context.Context) (_ bool, err error) {
			verdict, err = l.store.ToDelayed(ctx, e, w.retry)
			return verdict != stream.NotOwner, err
		}
	case writeAckCopy:
		what = "ack sent copy"
		op = func(ctx context.Context) (bool, error) { return l.store.AckSent(ctx, e, lj.job.ID) }
	default:
		panic(fmt.Sprintf("dispatch: write of kind %d", w.kind))
	}
	var owned bool
	err := l.health.retry(ctx, nil, e.Shard, telemetry.OpWrite, what, true, l.cfg.Now, func(ctx context.Context) (err error) {
		owned, err = op(ctx)
		return err
	})
	switch {
	case err != nil:
		id := ""
		if lj.job != nil {
			id = lj.job.ID
		}
		l.cfg.Logger.Error("dispatch: outcome not recorded before shutdown; the replica that takes over the entry sends the job again",
			"shard", e.Shard, "provider", l.provider, "id", logID(id), "code", code, "attempt", lj.attempt, "entry", e.ID, "err", err)
		return
	case !owned && w.kind == writeFinish && w.result.Sent:
		// Accepted, but the consumer that took the entry over has ended the job already (an
		// accepted send of a job still held is recorded even so): its record stands, and the
		// push went out from both. (Or an earlier try of this very write went through and its
		// reply was lost, which this cannot tell apart.)
		l.cfg.Logger.Warn("dispatch: push accepted after another consumer took the entry over and ended the job; that record stands, and the push may have gone out twice",
			"shard", e.Shard, "provider", l.provider, "id", logID(w.result.ID), "entry", e.ID)
		return
	case !owned:
		// The entry idled past the visibility timeout and another consumer claimed it; that
		// consumer records it. Nothing was changed here.
		l.cfg.Logger.Info("dispatch: entry reclaimed by another consumer before it was recorded",
			"shard", e.Shard, "provider", l.provider, "entry", e.ID)
		return
	}
	l.count(lj, w, verdict)
	if w.kind == writeFinish {
		l.logFinished(e, lj, w.result)
	}
	switch {
	case w.kind == writeRetry && verdict == stream.AckedCopy:
		l.cfg.Logger.Debug("dispatch: a copy of this job already waits to retry; acknowledged",
			"shard", e.Shard, "provider", l.provider, "id", w.retry.ID)
	case w.kind == writeRetry && verdict != stream.Queued:
		// Past a cap the script wrote the dead record itself, with the reason.
		l.cfg.Logger.Info("dispatch: retry refused by the delayed set; dead-lettered",
			"shard", e.Shard, "provider", l.provider, "id", w.retry.ID, "verdict", verdict.String())
	}
}

// logFinished is the one line of a terminal outcome: at debug level for ACCEPTED, at info for
// every other code. It carries the endpoint's keyed hash, never the endpoint.
func (l *lane) logFinished(e stream.Entry, lj *laneJob, r stream.Result) {
	level := slog.LevelInfo
	if r.Code == string(taxonomy.Accepted) {
		level = slog.LevelDebug
	}
	log := l.cfg.Logger
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"shard", e.Shard, "provider", l.provider, "id", logID(r.ID), "code", r.Code, "status", r.Status,
		"attempt", r.Attempt, "latency", r.Latency}
	log.Log(context.Background(), level, "dispatch: job finished", append(attrs, l.endpointHash(lj)...)...)
}

// endpointHash is the endpoint_hash attribute of a job's log line, or none without a key or a
// job.
func (l *lane) endpointHash(lj *laneJob) []any {
	if key := l.cfg.EndpointHashKey; key != nil && lj.job != nil {
		return []any{"endpoint_hash", telemetry.EndpointHash(key, lj.job.Subscription.Endpoint)}
	}
	return nil
}

// count tells the metrics what a write that went through did: a terminal record, a retry
// scheduled (a put-back, with the same attempt, is none), a dead letter by its reason.
func (l *lane) count(lj *laneJob, w write, verdict stream.RetryVerdict) {
	m := l.cfg.Metrics
	switch w.kind {
	case writeFinish:
		m.JobFinished(l.provider, w.result.Code)
	case writeDead:
		if w.dead.Code == string(taxonomy.InvalidJob) {
			m.DeadLetter(telemetry.DeadInvalidJob)
		} else {
			m.DeadLetter(telemetry.DeadRetriesExhausted)
		}
	case writeRetry:
		switch {
		case verdict == stream.DeadGlobalCap || verdict == stream.DeadRecipientCap:
			m.DeadLetter(telemetry.DeadCapReached)
		case verdict == stream.Queued && w.retry.Attempt > lj.attempt:
			m.RetryScheduled(l.provider, w.retry.Code)
		}
	}
}
