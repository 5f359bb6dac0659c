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
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// delivery is one lane entry on its way through its lane, from the reader that takes it to
// the state change that ends its turn. Its steps, in the order below:
//
//   - start (lane.startDelivery): decode the entry and take an in-flight slot, or put the
//     entry back to the delayed set for a moment; the rest runs on a worker goroutine that
//     holds the slot (run);
//   - check: the looks at Redis that may end it without a send (its owner, the sent mark, the
//     gone mark), and beforeSend's decision;
//   - admit: the host breaker of unknown hosts, the provider's breaker or the host's own limits,
//     the provider's token;
//   - send: the push, and what its outcome tells the breakers, the metrics and OnAttempt;
//   - record: afterSend's decision (or the check's, or a put-back) written to Redis, logged
//     and counted.
//
// Where an outcome leads (beforeSend, afterSend, putBack) is decided in outcome.go; the
// breakers and the token are the provider's limits (admission.go, provlimits.go). A delivery
// is owned by one goroutine at a time: the reader's until start hands it to a worker.
type delivery struct {
	l *lane
	e stream.Entry
	// laneJob is the entry decoded; invalid says why it cannot be sent (parseLaneEntry), nil
	// for an entry this gateway wrote.
	*laneJob
	invalid error
	// reclaimed says the reclaimer handed the entry over rather than a read.
	reclaimed bool
	// readAt is when the read or claim that brought the entry began, in real time like the
	// idle time Redis keeps for it (never later than Redis started counting it): admit looks
	// again at who owns an entry that waited here long enough to be reclaimed by another
	// replica (lane.recheckAfter), the wait behind the entries of its read included.
	readAt time.Time
	// tok counts the delivery as queued for its provider's token from the slot until admit has
	// the token or it leaves without needing one.
	tok tokenWait
	// retry, recipient and host are what its slot is counted by: a retry (attempt > 0), the
	// job's recipient, and the unknown host it goes to ("" for a listed provider's); pooled says
	// it holds a place in the fallback lane's unproven pool too.
	retry     bool
	recipient string
	host      string
	pooled    bool
}

// laneJob is a lane entry decoded.
type laneJob struct {
	raw      string
	job      *jobfmt.Job
	attempt  int
	enqueued time.Time // fixed at intake: the lane entry's enqueued_at
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

// parseLaneEntry reads the fields intake (or the promoter) wrote. An error means the entry was
// written by something else than this gateway, and says what is wrong; the fields read before
// the fault are set even so.
func parseLaneEntry(e stream.Entry, now time.Time) (*laneJob, error) {
	lj := &laneJob{raw: e.Fields["job"], class: stream.ClassOfLane(e.Stream)}
	if lj.raw == "" {
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
	lj.job, err = jobfmt.DecodeString(lj.raw, now)
	if err != nil {
		return lj, &invalidEntry{reason: invalidReason(err), err: err}
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

// startDelivery takes a slot for e and runs its delivery in a new goroutine (lane.begin). The
// slot is counted by the kind of delivery (a retry, attempt > 0, may use only the retries'
// share) and by recipient; in the fallback lane a delivery to a host not seen answering also
// needs a place in the unproven hosts' pool. When the recipient's cap or the pool is full, e
// waits in the lane's parking (in memory, still pending for this consumer) until a send of its
// recipient, or of an unproven host, ends: that is neither an attempt nor a failure, and the
// first deliveries and other recipients behind it in the lane go on. When the retries' share
// is full, e goes back to the delayed set with the same attempt for a moment. When no slot at
// all is free (the lanes of other shards share them) it waits for one, and gives up (leaving e
// pending, false) when the lane is told to stop. reclaimed says e came from the reclaimer
// rather than a read, and readAt when that read or claim began. readCtx is the reader's
// context, sendCtx the sends' (see run).
func (l *lane) startDelivery(readCtx, sendCtx context.Context, e stream.Entry, reclaimed bool, readAt time.Time) bool {
	cfg := l.cfg
	d := &delivery{l: l, e: e, reclaimed: reclaimed, readAt: readAt}
	d.laneJob, d.invalid = parseLaneEntry(e, cfg.Now())
	if d.invalid == nil {
		d.retry, d.recipient = d.attempt > 0, d.job.Recipient
		d.host = l.hostKey(d.job)
	}
	return l.begin(readCtx, sendCtx, d, true) != stopping
}

// run is the delivery's turn on the goroutine that holds its slot: check, admit, send, record.
// ctx is the send's context, cancelled only when the grace period of a shutdown ends; stop is
// the reader's, cancelled when the lane is told to stop: an entry still waiting for its token,
// or for Redis to answer a check, then stays pending for another replica, like the entries
// read and never started.
func (d *delivery) run(ctx, stop context.Context) {
	defer d.tok.leave()
	end, ok := d.check(ctx, stop)
	if !ok {
		return
	}
	if end != nil {
		d.record(ctx, *end)
		return
	}
	adm, ok := d.admit(ctx, stop)
	if !ok {
		return
	}
	d.send(ctx, adm)
}

// check looks at what may end the entry without a send and decides (beforeSend). A job that
// was accepted by another attempt meanwhile is acknowledged without a second send; only a
// retry or a reclaimed entry can be one (intake moves no copy of a held or sent job into a
// lane), so a first delivery needs no look. ok is false when the entry must be left as it is:
// it is not ours any more, or Redis did not answer before the lane stopped.
func (d *delivery) check(ctx, stop context.Context) (end *nextState, ok bool) {
	l := d.l
	if d.reclaimed && !d.stillOurs(ctx, stop) {
		return nil, false
	}
	var m marks
	if d.invalid == nil && (d.attempt > 0 || d.reclaimed) {
		if d.retryCheck(ctx, stop, "check sent mark", func(ctx context.Context) (err error) {
			m.sent, err = l.store.WasSent(ctx, d.e.Shard, d.job.ID)
			return err
		}) != nil {
			return nil, false
		}
	}
	if d.invalid == nil && d.attempt > 0 && !m.sent {
		if d.retryCheck(ctx, stop, "check gone mark", func(ctx context.Context) (err error) {
			m.gone, err = l.store.IsGone(ctx, d.e.Shard, d.job.Subscription.Endpoint)
			return err
		}) != nil {
			return nil, false
		}
	}
	if end := d.campaignCheck(stop, l.cfg.Now()); end != nil && !m.sent {
		return end, true
	}
	return l.beforeSend(d.laneJob, d.invalid, m, l.cfg.Now()), true
}

// stillOurs reports whether the entry is still pending for this consumer, false when it is not
// or Redis cannot say (then it stays where it is, for a later reclaim round). Every state
// change checks its owner in its own script, but the send does not: a reclaimed entry may be
// finished before the lane starts it (the reclaimer can claim an entry of our own that idled
// past the visibility timeout just as the goroutine that had it finishes it, and offer it once
// that goroutine has let go: see lane.held), and an entry held here long may have been taken
// over. Without this look the job would go out a second time.
func (d *delivery) stillOurs(ctx, stop context.Context) bool {
	var owned bool
	if d.retryCheck(ctx, stop, "check owner", func(ctx context.Context) (err error) {
		owned, err = d.l.store.Owns(ctx, d.e)
		return err
	}) != nil {
		return false
	}
	if !owned {
		d.l.cfg.Logger.Debug("dispatch: entry already finished or taken over; dropped",
			"shard", d.e.Shard, "provider", d.l.provider, "entry", d.e.ID)
	}
	return owned
}

// retryCheck runs a Redis call that the send waits for (a check), retrying failures until it
// succeeds, ctx ends or stop ends (the lane is stopping: the entry stays pending for another
// replica).
func (d *delivery) retryCheck(ctx, stop context.Context, what string, op func(context.Context) error) error {
	return d.l.health.retry(ctx, stop.Done(), d.e.Shard, telemetry.OpCheck, what, false, d.l.cfg.Now, op)
}

// admit takes the entry through admission: the host breaker of unknown hosts (a skipped host's
// delivery is recorded as CIRCUIT_OPEN), the sender's pause and the provider's breaker or the
// host's own limits (a refusal puts the entry back: no attempt, no slot held; a job its
// sender's pause outlasts ends EXPIRED unsent), then the provider's token. The
// breakers come before the bucket: a delivery they refuse sends nothing, so it must not spend
// the provider's rate (a dead self-hosted server with a backlog would otherwise eat the
// fallback lane's tokens). An entry that waited here (for a slot, for a token) for half the
// visibility timeout may have been reclaimed by another replica meanwhile, which would send it
// too: it is looked at again. ok is false when the entry's turn ended here.
func (d *delivery) admit(ctx, stop context.Context) (adm admission, ok bool) {
	l := d.l
	cfg := l.cfg
	host := d.host
	if host != "" && !l.hosts.Allow(host, cfg.Now()) {
		d.tok.leave()
		out := taxonomy.Local(l.provider, taxonomy.CircuitOpen, "host "+host+" is skipped after repeated transport failures")
		now := cfg.Now()
		d.reportAttempt(out, time.Time{}, now)
		r := stream.Result{ID: d.job.ID, Provider: l.provider, Attempt: d.attempt, Code: string(out.Code), Detail: out.Detail, At: now}
		d.record(ctx, l.afterSend(d.laneJob, out, r))
		return admission{}, false
	}
	adm, retryIn, err := l.passBreakers(stop, host, d.job.VAPIDKey)
	if err != nil {
		d.tok.leave()
		if retryIn > 0 {
			now := cfg.Now()
			next := l.putBack(d.laneJob, now.Add(retryIn), now)
			if errors.Is(err, errKeyPaused) {
				next = l.parked(d.laneJob, now.Add(retryIn), now)
			}
			d.record(ctx, next)
		}
		return admission{}, false
	}
	adm.host, adm.hosts, adm.proven = host, l.hosts, l.lim.proven
	if d.pooled {
		// The unproven hosts' share of the rate first, so that what they spend of the lane's
		// own tokens is bounded by it.
		if l.lim.waitUnprovenToken(stop, cfg.Now) != nil {
			adm.end(cfg.Now(), nil)
			return admission{}, false
		}
		d.tok.join(l.lim, d.laneJob.class.IsBulk())
	}
	if l.lim.waitClassToken(stop, cfg.Now, d.laneJob.class) != nil {
		adm.end(cfg.Now(), nil) // stopping before the send: nothing was sent
		return admission{}, false
	}
	d.tok.leave()
	if time.Since(d.readAt) > l.recheckAfter && !d.stillOurs(ctx, stop) {
		adm.end(cfg.Now(), nil)
		return admission{}, false
	}
	now := cfg.Now()
	if end := d.campaignCheck(stop, now); end != nil {
		// The wait for the token may have outlasted a pause or a cancel of its campaign.
		adm.end(now, nil)
		d.record(ctx, *end)
		return admission{}, false
	}
	base := stream.Result{ID: d.job.ID, Provider: l.provider, Attempt: d.attempt}
	if r, ok := l.expired(d.laneJob, base, now); ok { // the token took the last of the TTL
		adm.end(now, nil)
		d.record(ctx, nextState{kind: toLedger, result: r})
		return admission{}, false
	}
	return adm, true
}

// send pushes the job, tells the breakers (adm), the metrics and OnAttempt how it went, and
// records where the job goes next (afterSend). A send the grace period cut short before any
// answer came records nothing.
func (d *delivery) send(ctx context.Context, adm admission) {
	l := d.l
	began := l.cfg.Now()
	l.cfg.Metrics.SendWait(l.provider, string(d.class), began.Sub(d.due))
	out := l.cfg.sender().Send(ctx, d.message(began))
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
	d.reportAttempt(out, began, at)
	r := stream.Result{ID: d.job.ID, Provider: l.provider, Attempt: d.attempt, Code: string(out.Code),
		Status: out.Status, Detail: out.Detail, Latency: at.Sub(began), At: at,
		// While entries wait for the provider's tokens, the slot this record holds delays no
		// send: the record may wait for others (stream.Options.CommitLinger).
		Linger: l.lim.tokenQueue() > 0}
	d.record(ctx, l.afterSend(d.laneJob, out, r))
}

// message is the push of the job sent at now, with the TTL that remains.
func (d *delivery) message(now time.Time) *adapter.Message {
	j := d.job
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(d.ttlFrom)
	return &adapter.Message{
		ID: j.ID, Subscription: j.Subscription, Parsed: j.Parsed,
		Payload: j.Payload, Ciphertext: j.Ciphertext,
		TTL: max(0, int(remaining/time.Second)), Urgency: j.Urgency, Topic: j.Topic, Key: d.l.cfg.Keys[j.VAPIDKey],
		Provider: d.l.provider,
	}
}

// reportAttempt hands an attempt's outcome to the metrics (a send, with its duration: began is
// when it started, zero for a delivery refused before any request, which the metrics count no
// send) and to Config.OnAttempt, when set.
func (d *delivery) reportAttempt(out taxonomy.Outcome, began, at time.Time) {
	cfg := d.l.cfg
	if !began.IsZero() {
		cfg.Metrics.Send(d.l.provider, string(d.class), string(out.Code), at.Sub(began), d.job.ID)
	}
	if cfg.OnAttempt == nil {
		return
	}
	cfg.OnAttempt(Attempt{Provider: d.l.provider, JobID: d.job.ID, Attempt: d.attempt, Code: out.Code,
		Status: out.Status, Enqueued: d.enqueued, At: at})
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

// recordedChecker is a store that can look for a ledger record (*stream.Store).
type recordedChecker interface {
	Recorded(ctx context.Context, shard int, r stream.Result, since time.Time, limit int) (found, cut bool, err error)
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
func (d *delivery) recordedBefore(ctx context.Context, r stream.Result) (mine bool, unsure string) {
	rc, ok := d.l.store.(recordedChecker)
	if !ok {
		return false, "not read"
	}
	found, cut, err := rc.Recorded(ctx, d.e.Shard, r, r.At.Add(-recordedLookBack), recordedScanLimit)
	switch {
	case err != nil:
		return false, "could not be read: " + err.Error()
	case found:
		d.l.cfg.Logger.Info("dispatch: outcome write answered after the entry was gone: an earlier try of it, whose reply was lost, recorded it; the push went out once",
			"shard", d.e.Shard, "provider", d.l.provider, "id", logID(r.ID), "entry", d.e.ID)
		return true, ""
	case cut:
		return false, fmt.Sprintf("no record of this attempt in the newest %d records", recordedScanLimit)
	}
	return false, "no record of this attempt"
}

// record writes the state change next to Redis: it retries Redis errors until the write goes
// through or ctx ends (recordContext bounds that at shutdown), keeping the shard's gate closed
// meanwhile. An outcome it could not write is logged, job by job: the replica that takes over
// the entry will send it again. It logs when another consumer owns the entry by now.
func (d *delivery) record(ctx context.Context, next nextState) {
	l, e := d.l, d.e
	if d.job != nil && d.job.Campaign != "" {
		// Every record of a campaign's recipient says whose it is.
		next.result.Campaign, next.result.Recipient = d.job.Campaign, d.job.Recipient
		next.dead.Campaign, next.dead.Recipient = d.job.Campaign, d.job.Recipient
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
		l.cfg.Logger.Info("dispatch: job dead-lettered", append(attrs, d.endpointHash()...)...)
		op = func(ctx context.Context) (bool, error) { return l.store.ToDead(ctx, e, next.dead) }
	case toDelayed:
		what, code = "to delayed", next.retry.Code
		op = func(ctx context.Context) (_ bool, err error) {
			verdict, err = l.store.ToDelayed(ctx, e, next.retry)
			return verdict != stream.NotOwner, err
		}
	case ackCopy:
		what = "ack sent copy"
		op = func(ctx context.Context) (bool, error) { return l.store.AckSent(ctx, e, d.job.ID) }
	case holdBack:
		what = "hold back campaign job"
		el, _ := d.holdElement() // campaignCheck holds back only a job it can keep so
		h := stream.HeldJob{Campaign: d.job.Campaign, Provider: l.provider, JobID: d.job.ID, Recipient: d.job.Recipient,
			Job: d.raw, Element: el, Attempt: d.attempt, At: l.cfg.Now()}
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
		owned, unsure = d.recordedBefore(ctx, next.result)
	}
	switch {
	case err != nil:
		id := ""
		if d.job != nil {
			id = d.job.ID
		}
		l.cfg.Logger.Error("dispatch: outcome not recorded before shutdown; the replica that takes over the entry sends the job again",
			"shard", e.Shard, "provider", l.provider, "id", logID(id), "code", code, "attempt", d.attempt, "entry", e.ID, "err", err)
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
		// The entry idled past the visibility timeout and another consumer claimed it; that
		// consumer records it. Nothing was changed here.
		l.cfg.Logger.Info("dispatch: entry reclaimed by another consumer before it was recorded",
			"shard", e.Shard, "provider", l.provider, "entry", e.ID)
		return
	}
	d.countRecorded(next, verdict)
	if next.kind == toLedger {
		d.logFinished(next.result)
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

// countRecorded tells the metrics what a state change that went through did: a terminal
// record, a retry scheduled (a put-back, with the same attempt, is none), a dead letter by its
// reason.
func (d *delivery) countRecorded(next nextState, verdict stream.RetryVerdict) {
	m, provider := d.l.cfg.Metrics, d.l.provider
	switch next.kind {
	case toLedger:
		m.JobFinished(provider, string(d.class), next.result.Code)
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
		case verdict == stream.Queued && next.retry.Attempt > d.attempt:
			m.RetryScheduled(provider, next.retry.Code)
		}
	}
}

// logFinished is the one line of a terminal outcome: at debug level for ACCEPTED, at info for
// every other code. It carries the endpoint's keyed hash, never the endpoint.
func (d *delivery) logFinished(r stream.Result) {
	level := slog.LevelInfo
	if r.Code == string(taxonomy.Accepted) {
		level = slog.LevelDebug
	}
	log := d.l.cfg.Logger
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"shard", d.e.Shard, "provider", d.l.provider, "id", logID(r.ID), "code", r.Code, "status", r.Status,
		"attempt", r.Attempt, "latency", r.Latency}
	log.Log(context.Background(), level, "dispatch: job finished", append(attrs, d.endpointHash()...)...)
}

// endpointHash is the endpoint_hash attribute of the job's log line, or none without a key or
// a job.
func (d *delivery) endpointHash() []any {
	if key := d.l.cfg.EndpointHashKey; key != nil && d.job != nil {
		return []any{"endpoint_hash", telemetry.EndpointHash(key, d.job.Subscription.Endpoint)}
	}
	return nil
}
