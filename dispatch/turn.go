package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	jobfmt "github.com/webpush-gateway/webpush-gateway/job" // "job" names one job in this package
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// turn is one lane entry's way from the read that took it to the state change that ends it.
// Its steps, in the order below:
//
//   - start (lane.begin): decode the entry and make the slot it was read with its own (a
//     retry's, its recipient's, an unproven host's); an entry that may not start now goes back
//     to the delayed set for a moment: it gives back its token at once and its slot once that
//     is written. The rest runs on a worker goroutine that holds the slot (run);
//   - check: the looks at Redis that may end it without a send (the sent mark of a retry or a
//     redelivered entry, the gone mark of a retry, its campaign's state), and beforeSend's
//     decision;
//   - admit: the host breaker of unknown hosts, the provider's breaker or the host's own limits,
//     the sender's pause (the provider's token was taken before the read);
//   - send: the push, and what its outcome tells the breakers, the metrics and OnAttempt;
//   - record: afterSend's decision (or the check's, or a put-back) written to Redis, logged and
//     counted.
//
// Where an outcome leads (beforeSend, afterSend, putBack) is decided in outcome.go; the
// breakers are the provider's limits (admission.go, provlimits.go). A turn is owned by one
// goroutine at a time: the reader's until begin hands it to a worker.
type turn struct {
	l *lane
	e stream.Entry
	// laneJob is the entry decoded; invalid says why it cannot be sent (parseLaneEntry), nil
	// for an entry this gateway wrote.
	*laneJob
	invalid error
	// readAt is when the read that took the entry ended: an entry that waited here (for a
	// host's or a sender's pause, for Redis to answer a check) long enough to be handed back by
	// another replica is looked at again before its send.
	readAt time.Time
	// retry, recipient and host are what its slot is claimed for: a retry (attempt > 0), the
	// job's recipient, and the unknown host it goes to ("" for a listed provider's); pooled says
	// it holds a place in the fallback lane's unproven pool too; claimed that the slot is the
	// turn's (Slots.Claim), not only taken. skipped says the host breaker refused host when the
	// entry was read: the turn claims no place in the pool and ends CIRCUIT_OPEN (admit).
	retry     bool
	recipient string
	host      string
	skipped   bool
	pooled    bool
	claimed   bool
	// token is set while the turn holds the provider's token it was read with: a turn that
	// ends without a request gives it back.
	token bool
}

// begin starts e's turn, holding the slot and the token e was read with: it decodes e, claims
// the slot for the kind of delivery (a retry, attempt > 0, may use only the retries' share; a
// recipient has a cap; in the fallback lane a host not seen answering needs a place in the
// unproven hosts' pool), and runs the turn on a worker. An entry whose claim is refused goes
// back to the delayed set for a moment, with its attempt (not an attempt, not a failure): it
// waits in Redis, and the entries behind it go on. readCtx is the reader's context, sendCtx the
// sends' (see run).
func (l *lane) begin(readCtx, sendCtx context.Context, e stream.Entry) {
	t := &turn{l: l, e: e, readAt: time.Now(), token: true}
	l.inHand.add(e)
	t.laneJob, t.invalid = parseLaneEntry(e, l.cfg.Now())
	if t.invalid == nil {
		t.retry, t.recipient, t.host = t.attempt > 0, t.job.Recipient, l.hostKey(t.job)
		t.skipped = t.host != "" && l.hosts.Refuses(t.host, l.cfg.Now())
		if err := t.claim(); err != nil {
			t.giveBackToken()
			l.inflight.Add(1)
			l.workers.run(func() {
				defer l.inflight.Done()
				// The slot it was read with is held until the put-back is written, so that the
				// put-backs in progress are bounded by the slots, as the sends are.
				defer l.lim.slots.Put(1)
				defer l.inHand.done(e)
				t.record(sendCtx, l.refused(t.laneJob, err, l.cfg.Now()))
			})
			return
		}
	}
	l.inflight.Add(1)
	l.workers.run(func() {
		defer l.inflight.Done()
		defer t.release()
		t.run(sendCtx, readCtx)
	})
}

// errUnprovenFull says the fallback lane's unproven hosts hold their whole pool.
var errUnprovenFull = errors.New("dispatch: the unproven hosts' pool is full")

// claim makes the turn's slot its own, and takes a place in the unproven pool for a host not
// seen answering that it may send to.
func (t *turn) claim() error {
	pl := t.l.lim
	if t.host != "" && !t.skipped && pl.proven != nil && !pl.proven.Proven(t.host) {
		if !pl.tryUnproven() {
			return errUnprovenFull
		}
		t.pooled = true
	}
	if err := pl.slots.Claim(t.retry, t.recipient); err != nil {
		if t.pooled {
			pl.releaseUnproven()
			t.pooled = false
		}
		return err
	}
	t.claimed = true
	return nil
}

// release gives back what the turn held: its slot, its place in the unproven pool, and its
// token when no request went out.
func (t *turn) release() {
	t.l.inHand.done(t.e)
	pl := t.l.lim
	pl.turns.noteHold(time.Since(t.readAt))
	if t.pooled {
		pl.releaseUnproven()
	}
	if t.claimed {
		pl.slots.Release(t.retry, t.recipient)
	} else {
		pl.slots.Put(1)
	}
	t.giveBackToken()
}

// giveBackToken returns the provider's token the turn was read with, once, when it sends
// nothing with it.
func (t *turn) giveBackToken() {
	if t.token {
		t.token = false
		t.l.lim.tokens.Return(time.Now(), 1)
	}
}

// run is the turn on the goroutine that holds its slot: check, admit, send, record. ctx is the
// send's context, cancelled only when the grace period of a shutdown ends; stop is the
// reader's, cancelled when the lane is told to stop: a turn that has not sent yet then hands its
// entry back (handBack), so another replica takes it at once.
func (t *turn) run(ctx, stop context.Context) {
	end, ok := t.check(ctx, stop)
	if !ok {
		t.handBack(ctx, stop)
		return
	}
	if end != nil {
		t.record(ctx, *end)
		return
	}
	adm, ok := t.admit(ctx, stop)
	if !ok {
		return
	}
	t.send(ctx, adm)
}

// handBack puts an entry whose turn the lane's stop cut short before its send back to the
// delayed set, due now, with its attempt: the promoter of any replica writes it to its lane
// within a moment, rather than leaving it pending for the visibility timeout. A turn not yet
// decoded, or stopped while Redis does not answer, leaves it pending: the reclaimer of another
// replica hands it back once this one has left.
func (t *turn) handBack(ctx, stop context.Context) {
	if stop.Err() == nil || t.invalid != nil || t.job == nil {
		return
	}
	now := t.l.cfg.Now()
	rctx, cancel := recordContext(ctx, t.l.cfg.RecordGrace)
	defer cancel()
	t.record(rctx, t.l.putBack(t.laneJob, now, now))
}

// check looks at what may end the entry without a send and decides (beforeSend). A job that
// was accepted by another attempt meanwhile is acknowledged without a second send; only a
// retry or a redelivered entry can be one (intake moves no copy of a held or sent job into a
// lane), so a first delivery needs no look. ok is false when Redis did not answer before the
// lane stopped.
func (t *turn) check(ctx, stop context.Context) (end *nextState, ok bool) {
	l := t.l
	if t.invalid == nil && t.ref != "" {
		if t.retryCheck(ctx, stop, "read campaign message", func(ctx context.Context) error {
			return t.complete(ctx, l.campaigns)
		}) != nil {
			return nil, false
		}
	}
	var m marks
	if t.invalid == nil && (t.attempt > 0 || t.redelivered) {
		if t.retryCheck(ctx, stop, "check sent mark", func(ctx context.Context) (err error) {
			m.sent, err = l.store.WasSent(ctx, t.e.Shard, t.job.ID)
			return err
		}) != nil {
			return nil, false
		}
	}
	if t.invalid == nil && t.attempt > 0 && !m.sent {
		if t.retryCheck(ctx, stop, "check gone mark", func(ctx context.Context) (err error) {
			m.gone, err = l.store.IsGone(ctx, t.e.Shard, t.job.Subscription.Endpoint)
			return err
		}) != nil {
			return nil, false
		}
	}
	if end := t.campaignCheck(stop, l.cfg.Now()); end != nil && !m.sent {
		return end, true
	}
	return l.beforeSend(t.laneJob, t.invalid, m, l.cfg.Now()), true
}

// retryCheck runs a Redis call that the send waits for (a check), retrying failures until it
// succeeds, ctx ends or stop ends (the lane is stopping: the entry is handed back).
func (t *turn) retryCheck(ctx, stop context.Context, what string, op func(context.Context) error) error {
	return t.l.health.retry(ctx, stop.Done(), t.e.Shard, telemetry.OpCheck, what, false, t.l.cfg.Now, op)
}

// admit takes the entry through admission: the host breaker of unknown hosts (a skipped host's
// delivery is recorded as CIRCUIT_OPEN), the sender's pause and the provider's breaker or the
// host's own limits (a refusal puts the entry back: no attempt; a job its sender's pause
// outlasts ends EXPIRED unsent). An entry that waited here long enough for another replica to
// have taken it over (half the visibility timeout, for a host's pause or for Redis) is looked at
// again. ok is false when the entry's turn ended here.
func (t *turn) admit(ctx, stop context.Context) (adm admission, ok bool) {
	l := t.l
	cfg := l.cfg
	host := t.host
	if host != "" && (t.skipped || !l.hosts.Allow(host, cfg.Now())) {
		t.giveBackToken()
		out := taxonomy.Local(l.provider, taxonomy.CircuitOpen, "host "+host+" is skipped after repeated transport failures")
		now := cfg.Now()
		t.reportAttempt(out, time.Time{}, now)
		r := stream.Result{ID: t.job.ID, Provider: l.provider, Attempt: t.attempt, Code: string(out.Code), Detail: out.Detail, At: now}
		t.record(ctx, l.afterSend(t.laneJob, out, r))
		return admission{}, false
	}
	adm, retryIn, err := l.passBreakers(stop, host, t.job.VAPIDKey)
	if err != nil {
		t.giveBackToken()
		now := cfg.Now()
		switch {
		case retryIn == 0: // stopping before the send
			t.handBack(ctx, stop)
		case errors.Is(err, errKeyPaused):
			t.record(ctx, l.parked(t.laneJob, now.Add(retryIn), now))
		default:
			t.record(ctx, l.putBack(t.laneJob, now.Add(retryIn), now))
		}
		return admission{}, false
	}
	adm.host, adm.hosts, adm.proven = host, l.hosts, l.lim.proven
	if time.Since(t.readAt) > cfg.VisibilityTimeout/2 && !t.stillOurs(ctx, stop) {
		adm.end(cfg.Now(), nil)
		return admission{}, false
	}
	now := cfg.Now()
	if end := t.campaignCheck(stop, now); end != nil {
		// The wait for a pause may have outlasted a pause or a cancel of its campaign.
		adm.end(now, nil)
		t.giveBackToken()
		t.record(ctx, *end)
		return admission{}, false
	}
	base := stream.Result{ID: t.job.ID, Provider: l.provider, Attempt: t.attempt}
	if r, ok := l.expired(t.laneJob, base, now); ok { // the wait took the last of the TTL
		adm.end(now, nil)
		t.giveBackToken()
		t.record(ctx, nextState{kind: toLedger, result: r})
		return admission{}, false
	}
	return adm, true
}

// stillOurs reports whether the entry is still pending for this consumer, false when it is not
// or Redis cannot say (then it stays where it is). Every state change checks its owner in its
// own script, but the send does not: an entry that waited here long may have been handed back
// by another replica (this one's heartbeat was not seen meanwhile), and without this look the
// job would go out a second time.
func (t *turn) stillOurs(ctx, stop context.Context) bool {
	var owned bool
	if t.retryCheck(ctx, stop, "check owner", func(ctx context.Context) (err error) {
		owned, err = t.l.store.Owns(ctx, t.e)
		return err
	}) != nil {
		return false
	}
	if !owned {
		t.l.cfg.Logger.Debug("dispatch: entry taken over by another consumer; dropped",
			"shard", t.e.Shard, "provider", t.l.provider, "entry", t.e.ID)
	}
	return owned
}

// send pushes the job, tells the breakers (adm), the metrics and OnAttempt how it went, and
// records where the job goes next (afterSend). A send the grace period cut short before any
// answer came records nothing.
func (t *turn) send(ctx context.Context, adm admission) {
	l := t.l
	began := l.cfg.Now()
	l.cfg.Metrics.SendWait(l.provider, string(t.class), began.Sub(t.due))
	t.token = false // spent
	out := l.cfg.sender().Send(ctx, t.message(began))
	at := l.cfg.Now()
	if ctx.Err() != nil && out.Code != taxonomy.Accepted && out.Status == 0 {
		// The grace period cut the attempt short before any answer came: the outcome is our
		// own doing and says nothing about the provider or the host. The entry stays pending
		// and another replica sends it.
		adm.end(at, nil)
		return
	}
	// The push went out, or the provider answered: its outcome is written even when the grace
	// period ends before or during the write (see recordContext).
	ctx, cancel := recordContext(ctx, l.cfg.RecordGrace)
	defer cancel()
	adm.end(at, &out)
	t.reportAttempt(out, began, at)
	r := stream.Result{ID: t.job.ID, Provider: l.provider, Attempt: t.attempt, Code: string(out.Code),
		Status: out.Status, Detail: out.Detail, Latency: at.Sub(began), At: at,
		// While the provider's tokens are the limit, the slot this record holds delays no
		// send: the record may wait for others (stream.Options.CommitLinger).
		Linger: l.backlog.Load()}
	t.record(ctx, l.afterSend(t.laneJob, out, r))
}

// message is the push of the job sent at now, with the TTL that remains.
func (t *turn) message(now time.Time) *adapter.Message {
	j := t.job
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(t.ttlFrom)
	return &adapter.Message{
		ID: j.ID, Subscription: j.Subscription, Parsed: j.Parsed,
		Payload: j.Payload, Ciphertext: j.Ciphertext,
		TTL: max(0, int(remaining/time.Second)), Urgency: j.Urgency, Topic: j.Topic, Key: t.l.cfg.Keys[j.VAPIDKey],
		Provider: t.l.provider,
	}
}

// reportAttempt hands an attempt's outcome to the metrics (a send, with its duration: began is
// when it started, zero for a delivery refused before any request, which the metrics count no
// send) and to Config.OnAttempt, when set.
func (t *turn) reportAttempt(out taxonomy.Outcome, began, at time.Time) {
	cfg := t.l.cfg
	if !began.IsZero() {
		cfg.Metrics.Send(t.l.provider, string(t.class), string(out.Code), at.Sub(began), t.job.ID)
	}
	if cfg.OnAttempt == nil {
		return
	}
	cfg.OnAttempt(Attempt{Provider: t.l.provider, JobID: t.job.ID, Attempt: t.attempt, Code: out.Code,
		Status: out.Status, Enqueued: t.enqueued, At: at})
}

// record writes the state change next to Redis: it retries Redis errors until the write goes
// through or ctx ends (recordContext bounds that at shutdown), keeping the shard's gate closed
// meanwhile. An outcome it could not write is logged, job by job: the replica that takes over
// the entry will send it again. It logs when another consumer owns the entry by now.
func (t *turn) record(ctx context.Context, next nextState) {
	l, e := t.l, t.e
	if t.job != nil && t.job.Campaign != "" {
		// Every record of a campaign's recipient says whose it is.
		next.result.Campaign, next.result.Recipient = t.job.Campaign, t.job.Recipient
		next.dead.Campaign, next.dead.Recipient = t.job.Campaign, t.job.Recipient
	}
	var (
		what, code string
		verdict    stream.RetryVerdict
		op         func(context.Context) (bool, error)
	)
	switch next.kind {
	case toLedger:
		what, code = "finish", next.result.Code
		op = func(ctx context.Context) (bool, error) { return l.store.Finish(ctx, e, next.result) }
	case toDead:
		what, code = "to dead", next.dead.Code
		attrs := []any{"shard", e.Shard, "provider", l.provider, "id", logID(next.dead.ID), "code", next.dead.Code,
			"attempt", next.dead.Attempt, "reason", next.dead.Reason}
		if next.result.ID != "" { // the last attempt's answer: retries exhausted
			attrs = append(attrs, "status", next.result.Status, "latency", next.result.Latency)
		}
		l.cfg.Logger.Info("dispatch: job dead-lettered", append(attrs, t.endpointHash()...)...)
		op = func(ctx context.Context) (bool, error) { return l.store.ToDead(ctx, e, next.dead) }
	case toDelayed:
		what, code = "to delayed", next.retry.Code
		op = func(ctx context.Context) (_ bool, err error) {
			verdict, err = l.store.ToDelayed(ctx, e, next.retry)
			return verdict != stream.NotOwner, err
		}
	case ackCopy:
		what = "ack sent copy"
		op = func(ctx context.Context) (bool, error) { return l.store.AckSent(ctx, e, t.job.ID) }
	case holdBack:
		what = "hold back campaign job"
		el, _ := t.holdElement() // campaignCheck holds back only a job it can keep so
		h := stream.HeldJob{Campaign: t.job.Campaign, Provider: l.provider, JobID: t.job.ID, Recipient: t.job.Recipient,
			Job: t.raw, Element: el, Attempt: t.attempt, At: l.cfg.Now()}
		op = func(ctx context.Context) (bool, error) { return l.campaigns.ops.Hold(ctx, e, h) }
	default:
		panic(fmt.Sprintf("dispatch: next state of kind %d", next.kind))
	}
	var owned bool
	err := l.health.retry(ctx, nil, e.Shard, telemetry.OpWrite, what, true, l.cfg.Now, func(ctx context.Context) (err error) {
		owned, err = op(ctx)
		return err
	})
	var unsure string // why an accepted send not recorded here may have had a second one
	if err == nil && !owned && next.kind == toLedger && next.result.Sent {
		owned, unsure = t.recordedBefore(ctx, next.result)
	}
	switch {
	case err != nil:
		id := ""
		if t.job != nil {
			id = t.job.ID
		}
		l.cfg.Logger.Error("dispatch: outcome not recorded before shutdown; the replica that takes over the entry sends the job again",
			"shard", e.Shard, "provider", l.provider, "id", logID(id), "code", code, "attempt", t.attempt, "entry", e.ID, "err", err)
		return
	case !owned && next.kind == toLedger && next.result.Sent:
		// Accepted, but the consumer that took the entry over has ended the job already (an
		// accepted send of a job still held is recorded even so): its record stands, and the
		// push went out from both. recordedBefore has ruled out the other way to get here: an
		// earlier try of this very write that went through, its reply lost.
		l.cfg.Logger.Warn("dispatch: push accepted after another consumer took the entry over and ended the job; that record stands, and the push may have gone out twice",
			"shard", e.Shard, "provider", l.provider, "id", logID(next.result.ID), "entry", e.ID, "ledger", unsure)
		return
	case !owned:
		// The entry was handed back by another consumer's reclaimer (this one's heartbeat was
		// not seen) and is another's now; that consumer records it. Nothing was changed here.
		l.cfg.Logger.Info("dispatch: entry taken over by another consumer before it was recorded",
			"shard", e.Shard, "provider", l.provider, "entry", e.ID)
		return
	}
	t.countRecorded(next, verdict)
	if next.kind == toLedger {
		t.logFinished(next.result)
	}
	switch {
	case next.kind == toDelayed && verdict == stream.AckedCopy:
		l.cfg.Logger.Debug("dispatch: a copy of this job already waits to retry; acknowledged",
			"shard", e.Shard, "provider", l.provider, "id", next.retry.ID)
	case next.kind == toDelayed && verdict != stream.Queued:
		// Past a cap the script wrote the dead record itself, with the reason.
		l.cfg.Logger.Info("dispatch: retry refused by the delayed set; dead-lettered",
			"shard", e.Shard, "provider", l.provider, "id", next.retry.ID, "verdict", verdict.String())
	}
}

// recordContext is the context the outcome of a send is written under. It is not cancelled
// with ctx: a push that went out must be recorded (an accepted one with its sent mark, or the
// replica that takes over the entry sends it a second time), and the write retries Redis
// errors for as long as the process runs. Once ctx is cancelled (the grace period of a
// shutdown has ended, before the write or while it runs) the write has grace more, so that a
// shutdown still ends when Redis is gone; an outcome not written by then is logged (record).
func recordContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer // guarded by mu; set once ctx is cancelled
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if rctx.Err() == nil { // the write has not finished yet
			timer = time.AfterFunc(grace, cancel)
		}
	})
	return rctx, func() {
		stop()
		cancel()
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
	}
}

const (
	// recordedLookBack is how long before the answer the ledger is read from, for a record
	// of it: Redis's clock, which names the entries, may be behind the worker's.
	recordedLookBack = time.Minute
	// recordedScanLimit bounds that read: the records written since the answer, on a shard
	// busy enough to write more in that time, are not all read.
	recordedScanLimit = 10_000
)

// recordedBefore tells, for an accepted send whose outcome write found the entry no longer
// its own, whether the ledger holds this very record: an earlier try of the write (the
// client's or health.retry's, after Redis stalled past the read timeout) went through and only
// its reply was lost. Then the push went out once and the outcome is recorded: mine is true.
// Otherwise unsure says how far the ledger was read, for the warning.
func (t *turn) recordedBefore(ctx context.Context, r stream.Result) (mine bool, unsure string) {
	found, cut, err := t.l.store.Recorded(ctx, t.e.Shard, r, r.At.Add(-recordedLookBack), recordedScanLimit)
	switch {
	case err != nil:
		return false, "could not be read: " + err.Error()
	case found:
		t.l.cfg.Logger.Info("dispatch: outcome write answered after the entry was gone: an earlier try of it, whose reply was lost, recorded it; the push went out once",
			"shard", t.e.Shard, "provider", t.l.provider, "id", logID(r.ID), "entry", t.e.ID)
		return true, ""
	case cut:
		return false, fmt.Sprintf("no record of this attempt in the newest %d records", recordedScanLimit)
	}
	return false, "no record of this attempt"
}

// countRecorded tells the metrics what a state change that went through did: a terminal
// record, a retry scheduled (a put-back, with the same attempt, is none), a dead letter by its
// reason.
func (t *turn) countRecorded(next nextState, verdict stream.RetryVerdict) {
	m, provider := t.l.cfg.Metrics, t.l.provider
	switch next.kind {
	case toLedger:
		m.JobFinished(provider, string(t.class), next.result.Code)
	case toDead:
		if next.dead.Code == string(taxonomy.InvalidJob) {
			m.DeadLetter(telemetry.DeadInvalidJob)
		} else {
			m.DeadLetter(telemetry.DeadRetriesExhausted)
		}
	case toDelayed:
		switch {
		case verdict == stream.DeadGlobalCap || verdict == stream.DeadRecipientCap:
			m.DeadLetter(telemetry.DeadCapReached)
		case verdict == stream.Queued && next.retry.Attempt > t.attempt:
			m.RetryScheduled(provider, next.retry.Code)
		}
	}
}

// logFinished is the one line of a terminal outcome: at debug level for ACCEPTED, at info for
// every other code. It carries the endpoint's keyed hash, never the endpoint.
func (t *turn) logFinished(r stream.Result) {
	level := slog.LevelInfo
	if r.Code == string(taxonomy.Accepted) {
		level = slog.LevelDebug
	}
	log := t.l.cfg.Logger
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"shard", t.e.Shard, "provider", t.l.provider, "id", logID(r.ID), "code", r.Code, "status", r.Status,
		"attempt", r.Attempt, "latency", r.Latency}
	log.Log(context.Background(), level, "dispatch: job finished", append(attrs, t.endpointHash()...)...)
}

// endpointHash is the endpoint_hash attribute of the job's log line, or none without a key or
// a job.
func (t *turn) endpointHash() []any {
	if key := t.l.cfg.EndpointHashKey; key != nil && t.job != nil {
		return []any{"endpoint_hash", telemetry.EndpointHash(key, t.job.Subscription.Endpoint)}
	}
	return nil
}

// laneJob is a lane entry decoded.
type laneJob struct {
	// entryJob is the entry's "job": the whole job, or a campaign recipient's reference to its
	// campaign's message (ref names the campaign, "" for a whole job); raw is the whole job, as
	// a dead record keeps it, once complete has joined the message for a reference.
	entryJob, ref, raw string
	job                *jobfmt.Job
	attempt            int
	// redelivered says the entry was read before and handed back (stream.Entry.Redelivered):
	// its job may have been sent.
	redelivered bool
	enqueued    time.Time // fixed at intake: the lane entry's enqueued_at
	// ttlFrom is when every attempt's TTL counts from: the job's send_at when it gave one,
	// else enqueued (jobfmt.Job.TTLStart).
	ttlFrom time.Time
	// class is the class of the lane the entry came from: what decides its turn for slots and
	// tokens, and the lane its retries go back to.
	class jobfmt.Class
	// due is when the job became due to be sent, what the wait before its send counts from
	// (dueAt).
	due time.Time
}

// invalidEntry says why a lane entry cannot be sent. Its text is the reason its dead record
// gives: the field at fault, or the job package's reason for a job that fails its checks.
type invalidEntry struct {
	reason string
	err    error // the decoder's error, when the job itself is at fault
}

func (e *invalidEntry) Error() string { return e.reason }
func (e *invalidEntry) Unwrap() error { return e.err }

// parseLaneEntry reads the fields intake, the promoter or a campaign's expansion wrote. A
// campaign recipient's entry decodes as the job its reference makes, without the campaign's
// message, which complete joins in the turn. An error means the entry was written by something
// else than this gateway, and says what is wrong; the fields read before the fault are set even
// so.
func parseLaneEntry(e stream.Entry, now time.Time) (*laneJob, error) {
	lj := &laneJob{entryJob: e.Fields["job"], ref: e.Fields["campaign"], class: stream.ClassOfLane(e.Stream),
		redelivered: e.Redelivered()}
	lj.raw = lj.entryJob
	if lj.entryJob == "" {
		return lj, &invalidEntry{reason: `lane entry has no "job" field`}
	}
	var err error
	if lj.attempt, err = strconv.Atoi(e.Fields["attempt"]); err != nil || lj.attempt < 0 {
		return lj, &invalidEntry{reason: `lane entry: "attempt" is not a whole number`}
	}
	ms, err := strconv.ParseInt(e.Fields["enqueued_at"], 10, 64)
	if err != nil {
		return lj, &invalidEntry{reason: `lane entry: "enqueued_at" is not unix milliseconds`}
	}
	lj.enqueued = time.UnixMilli(ms)
	lj.job, err = jobfmt.DecodeString(lj.entryJob, now)
	if err != nil {
		return lj, &invalidEntry{reason: invalidReason(err), err: err}
	}
	if lj.ref != "" && lj.job.Campaign != lj.ref {
		return lj, &invalidEntry{reason: fmt.Sprintf(`lane entry: "campaign" %q is not its job's campaign`, lj.ref)}
	}
	lj.ttlFrom = lj.job.TTLStart(lj.enqueued)
	lj.due = dueAt(lj, e)
	return lj, nil
}

// dueAt is when the job of lane entry e became due to be sent. A first attempt was due from
// its enqueued_at, or from its send_at when that is later (a scheduled job was not due before
// it; one given a send_at already past when it was enqueued was not due before it arrived); a
// put-back of it keeps that, so a wait for a breaker or a paused key counts. A retry was due
// when its entry was written back to the lane: the entry keeps no due time of its own, and its
// id holds the time of that write. That leaves out the moment between the retry's backoff
// ending and the promoter moving it, and, for a retry put back, its earlier waits.
func dueAt(lj *laneJob, e stream.Entry) time.Time {
	if lj.attempt > 0 {
		if at := e.WrittenAt(); !at.IsZero() {
			return at
		}
	}
	if lj.job.SendAt.After(lj.enqueued) {
		return lj.job.SendAt
	}
	return lj.enqueued
}

// complete joins a campaign recipient's reference with its campaign's message, read once a
// campaign (campaignFeeder.message), into the job it sends; an entry whose campaign has no
// message becomes invalid, with why.
func (t *turn) complete(ctx context.Context, f *campaignFeeder) error {
	msg, ok, err := f.message(ctx, t.e.Shard, t.ref)
	if err != nil {
		return err
	}
	if !ok {
		t.invalid = &invalidEntry{reason: fmt.Sprintf("campaign %s has no message: it was never created, or it is gone", t.ref)}
		return nil
	}
	raw := jobfmt.WithMessage(t.entryJob, msg)
	j, err := jobfmt.DecodeString(raw, t.enqueued)
	if err != nil {
		t.invalid = &invalidEntry{reason: invalidReason(err), err: err}
		return nil
	}
	t.raw, t.job = raw, j
	t.ttlFrom = j.TTLStart(t.enqueued)
	return nil
}

// refused is where an entry goes whose slot claim was refused (claim): back to the delayed set
// with its attempt, for a moment. A recipient at its cap, or an unproven host with the pool
// full, comes back in its turn after the sends ahead of it (providerLimits.turns); a retry over
// the retries' share, about a second later.
func (l *lane) refused(lj *laneJob, why error, now time.Time) nextState {
	switch {
	case errors.Is(why, limits.ErrRecipientBusy):
		return l.putBack(lj, l.lim.turns.next("recipient "+lj.job.Recipient, now, l.lim.provider().PerRecipientInFlight), now)
	case errors.Is(why, errUnprovenFull):
		return l.putBack(lj, l.lim.turns.next("unproven", now, int(l.lim.unprovenCap())), now)
	}
	return l.putBack(lj, now.Add(putBackDelay(l.cfg.Rand())), now)
}
