package dispatch

import (
	"fmt"
	"strconv"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// goneMeanwhile is the ledger detail of a retry dropped because its endpoint was reported gone
// after the job's first attempt.
const goneMeanwhile = "endpoint reported gone meanwhile; not retried"

// nextKind is which state change ends a lane entry's turn.
type nextKind int

const (
	// toLedger records a terminal outcome (the ledger, and the gone stream or the sent mark as
	// the result asks).
	toLedger nextKind = iota + 1
	// toDelayed moves the job to the delayed set: a retry, or a put-back with the same attempt.
	toDelayed
	// toDead moves the job to the dead stream.
	toDead
	// ackCopy acknowledges an entry whose job another attempt already recorded.
	ackCopy
	// holdBack puts a paused campaign's job back in the campaign's list, unsent and with no
	// record (campaigns.go).
	holdBack
)

// nextState is where a lane entry goes when its turn ends, decided (beforeSend, afterSend,
// putBack) before its delivery writes it to Redis (delivery.record). Only the field of its
// kind is set.
type nextState struct {
	kind   nextKind
	result stream.Result      // toLedger
	retry  stream.RetryRecord // toDelayed
	dead   stream.DeadRecord  // toDead
}

// marks are what Redis said of an entry before its send: another attempt was accepted (its
// sent mark), its endpoint was reported gone (the gone mark).
type marks struct {
	sent, gone bool
}

// beforeSend decides whether an entry ends without a send, from parseLaneEntry's error
// (invalid) and the marks Redis gave, at now: an entry the gateway did not write, a copy of a
// job already accepted, a retry to an endpoint gone meanwhile, a job whose TTL ran out while it
// waited (checked before admission, so that jobs which ran out while the breaker was open cost
// no token and no probe), a key this replica does not have. nil means: go on to admission.
func (l *lane) beforeSend(lj *laneJob, invalid error, m marks, now time.Time) *nextState {
	if invalid != nil {
		return &nextState{kind: toDead, dead: stream.DeadRecord{ID: bestEffortID(lj.raw), Code: string(taxonomy.InvalidJob),
			Reason: invalid.Error(), Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, JobInvalid: true, At: now}}
	}
	j := lj.job
	base := stream.Result{ID: j.ID, Provider: l.provider, Attempt: lj.attempt, At: now}
	switch {
	case m.sent:
		return &nextState{kind: ackCopy}
	case m.gone:
		base.Code, base.Detail = string(taxonomy.Gone), goneMeanwhile
		return &nextState{kind: toLedger, result: base}
	}
	if r, ok := l.expired(lj, base, now); ok {
		return &nextState{kind: toLedger, result: r}
	}
	if l.cfg.Keys[j.VAPIDKey] == nil {
		// Intake checked the name; this replica may run with other keys than the one that did.
		return &nextState{kind: toDead, dead: stream.DeadRecord{ID: j.ID, Code: string(taxonomy.InvalidJob),
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
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(lj.ttlFrom)
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
func (l *lane) afterSend(lj *laneJob, out taxonomy.Outcome, r stream.Result) nextState {
	cfg, j := l.cfg, lj.job
	switch {
	case out.Code == taxonomy.Accepted:
		r.Sent = true
	case out.Code == taxonomy.ProxyError:
		// No tunnel: the push service never saw the job. It goes back with the same attempt, as
		// a put-back, so a proxy outage spends none of its retries and dead-letters nothing;
		// the proxy's breaker keeps the lane from reading while the proxy stays down, and the
		// TTL still ends a job that waited too long (EXPIRED when it comes back).
		openFor := time.Duration(0)
		if pb := l.lim.proxyBreaker(); pb != nil {
			openFor = pb.OpenFor()
		}
		next := l.putBack(lj, r.At.Add(proxyRetryDelay(cfg.Backoff.Base, openFor, cfg.Rand())), r.At)
		// No Code: a retry's code is what makes the delayed set count it toward --max-delayed,
		// and a put-back must not fill the provider's count while the proxy is down.
		next.retry.Detail = out.Detail
		return next
	case out.Code == taxonomy.Gone || out.Code == taxonomy.KeyMismatch:
		// The upstream must delete or renew the subscription: the gone stream tells it which.
		// Only GONE marks the endpoint, which drops the retries queued for it: an endpoint that
		// answered KEY_MISMATCH is alive, and a job signed with the key it was made with (this
		// one's retry under another vapid_key, or another job) still goes through.
		r.Gone, r.Endpoint = true, j.Subscription.Endpoint
		r.MarkGone = out.Code == taxonomy.Gone
	case out.Code.Retryable():
		remaining := time.Duration(j.TTL)*time.Second - r.At.Sub(lj.ttlFrom)
		due, v := cfg.Backoff.next(r.At, lj.attempt, out.RetryAfter, remaining, cfg.Rand())
		switch v {
		case retriesExhausted:
			return nextState{kind: toDead, result: r, dead: stream.DeadRecord{ID: j.ID, Code: string(out.Code),
				Reason:  fmt.Sprintf("gave up after %d attempts: %s", lj.attempt+1, describe(out)),
				Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: r.At}}
		case retryExpired:
			r.Code = string(taxonomy.Expired)
			r.Detail = fmt.Sprintf("ttl ends before attempt %d could be made; last attempt: %s", lj.attempt+2, describe(out))
		default:
			retry := lj.retryRecord(l.provider, due, r.At)
			retry.Attempt, retry.Recipient = lj.attempt+1, j.Recipient
			retry.MaxDelayed, retry.MaxPerRecipient = cfg.MaxDelayed, cfg.MaxPerRecipient
			retry.Code, retry.Detail = string(out.Code), out.Detail
			return nextState{kind: toDelayed, retry: retry}
		}
	}
	return nextState{kind: toLedger, result: r}
}

// putBack is the state change that returns an entry that may not start now (its provider's breaker,
// its host's limits, the retries' share, its recipient's cap or the unproven pool refused it, or
// the lane stopped before its send) to the delayed set,
// due at due, with the same attempt: nothing was tried. It passes no recipient and no caps: the
// job already takes room in Redis (in the lane), so moving it to the delayed set adds nothing
// the caps protect, and counting it as its recipient's retry would dead-letter that
// recipient's real retries at the cap.
func (l *lane) putBack(lj *laneJob, due, now time.Time) nextState {
	return nextState{kind: toDelayed, retry: lj.retryRecord(l.provider, due, now)}
}

// retryRecord is the entry of lj back in the delayed set for provider, due at due, with its
// attempt, decided at now: the entry's own job (a campaign recipient's reference stays one,
// with the whole job for a dead record), its class and whether it was read before.
func (lj *laneJob) retryRecord(provider string, due, now time.Time) stream.RetryRecord {
	r := stream.RetryRecord{
		ID: lj.job.ID, Provider: provider, Due: due, Attempt: lj.attempt,
		Job: lj.entryJob, Campaign: lj.ref, Redelivered: lj.redelivered,
		EnqueuedAtMs: lj.enqueued.UnixMilli(), At: now, Class: lj.class,
	}
	if lj.ref != "" {
		r.DeadJob = lj.raw
	}
	return r
}

// parked is the state change of an entry whose sender (VAPID key) the provider paused until
// due: back to the delayed set until then with the same attempt, as putBack, when its TTL
// lasts that long; else EXPIRED now, unsent, rather than waiting for nothing.
func (l *lane) parked(lj *laneJob, due, now time.Time) nextState {
	j := lj.job
	if end := lj.ttlFrom.Add(time.Duration(j.TTL) * time.Second); !due.Before(end) {
		return nextState{kind: toLedger, result: stream.Result{ID: j.ID, Provider: l.provider, Attempt: lj.attempt,
			Code: string(taxonomy.Expired), At: now,
			Detail: fmt.Sprintf("ttl of %ds ends while the provider has vapid key %q paused (until %s); not sent",
				j.TTL, j.VAPIDKey, due.UTC().Format(time.RFC3339))}}
	}
	return l.putBack(lj, due, now)
}

// putBackDelay is how long an entry that may not start now waits in the delayed set: about a
// second, jittered over [0.5 s, 1.5 s) so entries put back together come back spread out.
func putBackDelay(rnd float64) time.Duration {
	return 500*time.Millisecond + time.Duration(clamp01(rnd)*float64(time.Second))
}

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
