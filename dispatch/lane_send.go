package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// handle is the life of one lane entry: the checks that may spare a send, the provider's
// admission (host breaker, ratio breaker, token bucket), the send, and the one state change
// that records its outcome. stop is the reader's context, cancelled when the lane is told to
// stop: an entry still waiting for its token, or for Redis to answer a check, then stays
// pending for another replica, like the entries read and never started. ctx is cancelled only
// when the grace period of a shutdown ends. lj and reason are parseLaneEntry's; reclaimed says
// the reclaimer handed e over; readAt is when the lane took it (real time).
func (l *lane) handle(stop, ctx context.Context, e stream.Entry, lj *laneJob, reason string, reclaimed bool, readAt time.Time) {
	cfg := l.cfg
	// The entry counts as queued for a token (see providerLimits.readable) until it has one or
	// leaves without needing one.
	queued := true
	tokenDone := func() {
		if queued {
			queued = false
			l.lim.queued.Add(-1)
		}
	}
	defer tokenDone()
	if reclaimed && !l.stillOurs(ctx, stop, e) {
		return
	}
	if reason != "" {
		id := bestEffortID(lj.raw)
		l.toDead(ctx, e, lj, stream.DeadRecord{ID: id, Code: string(taxonomy.InvalidJob), Reason: reason,
			Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: cfg.Now()})
		return
	}
	j := lj.job

	// A job that was accepted by another attempt meanwhile is acknowledged without a second
	// send; that attempt wrote the ledger. Only a retry or a reclaimed entry can be one: intake
	// moves no copy of a held or sent job into a lane (stream's ToLane), so a first delivery
	// needs no look.
	if lj.attempt > 0 || reclaimed {
		var sent bool
		if l.ask(ctx, stop, e, "check sent mark", func(ctx context.Context) (err error) {
			sent, err = cfg.Store.WasSent(ctx, e.Shard, j.ID)
			return err
		}) != nil {
			return
		}
		if sent {
			l.move(ctx, "ack sent copy", e, lj, "", func(ctx context.Context) (bool, error) { return cfg.Store.AckSent(ctx, e, j.ID) })
			return
		}
	}
	base := stream.Result{ID: j.ID, Provider: l.provider, Attempt: lj.attempt}
	if lj.attempt > 0 {
		var gone bool
		if l.ask(ctx, stop, e, "check gone mark", func(ctx context.Context) (err error) {
			gone, err = cfg.Store.IsGone(ctx, e.Shard, j.Subscription.Endpoint)
			return err
		}) != nil {
			return
		}
		if gone {
			r := base
			r.Code, r.Detail, r.At = string(taxonomy.Gone), goneMeanwhile, cfg.Now()
			l.finish(ctx, e, lj, r)
			return
		}
	}
	// Checked before admission so that jobs which ran out while the breaker was open cost no
	// token and no probe when the lane reads them again.
	if r, ok := l.expired(lj, base, cfg.Now()); ok {
		l.finish(ctx, e, lj, r)
		return
	}
	key := cfg.Keys[j.VAPIDKey]
	if key == nil {
		// Intake checked the name; this replica may run with other keys than the one that did.
		l.toDead(ctx, e, lj, stream.DeadRecord{ID: j.ID, Code: string(taxonomy.InvalidJob),
			Reason:  fmt.Sprintf("vapid_key: no key named %q is configured", j.VAPIDKey),
			Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: cfg.Now()})
		return
	}

	// Admission. The host breaker and the ratio breaker come before the token bucket: a
	// delivery they refuse sends nothing, so it must not spend the provider's rate (a dead
	// self-hosted server with a backlog would otherwise eat the fallback lane's tokens).
	host := l.hostKey(j.Subscription.Endpoint)
	if host != "" && !l.hosts.Allow(host, cfg.Now()) {
		tokenDone()
		out := taxonomy.Local(l.provider, taxonomy.CircuitOpen, "host "+host+" is skipped after repeated transport failures")
		r := base
		r.Code, r.Detail, r.At = string(out.Code), out.Detail, cfg.Now()
		l.tell(lj, out, r.At)
		l.record(ctx, e, lj, out, r)
		return
	}
	adm, retryIn, err := l.admit(stop, host)
	if err != nil {
		tokenDone()
		if retryIn > 0 {
			// Back to the delayed set with the same attempt until the breaker (or the host's
			// throttle) may let it through: not an attempt, not a failure, and no slot held.
			l.putBack(ctx, e, lj, cfg.Now().Add(retryIn))
		}
		return
	}
	if l.lim.waitToken(stop, cfg.Now) != nil {
		adm.end(cfg.Now(), nil) // stopping before the send: nothing was sent
		return
	}
	tokenDone()
	// An entry that waited here (for a slot, for a token) for half the visibility timeout may
	// have been reclaimed by another replica meanwhile, which would send it too: look first.
	if time.Since(readAt) > l.recheckAfter && !l.stillOurs(ctx, stop, e) {
		adm.end(cfg.Now(), nil)
		return
	}

	now := cfg.Now()
	if r, ok := l.expired(lj, base, now); ok { // the token took the last of the TTL
		adm.end(now, nil)
		l.finish(ctx, e, lj, r)
		return
	}
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(lj.enqueued)
	m := &adapter.Message{
		ID: j.ID, Subscription: j.Subscription,
		Payload: j.Payload, Ciphertext: j.Ciphertext,
		TTL: max(0, int(remaining/time.Second)), Urgency: j.Urgency, Topic: j.Topic, Key: key,
	}

	out := cfg.Sender.Send(ctx, m)
	at := cfg.Now()
	if ctx.Err() != nil && out.Code != taxonomy.Accepted && out.Status == 0 {
		// The grace period cut the attempt short before any answer came: the outcome is our
		// own doing and says nothing about the provider or the host. The entry stays pending
		// and another replica sends it.
		adm.end(at, nil)
		return
	}
	// The push went out, or the provider answered: its outcome is written even when the grace
	// period ends before or during the write (see recordContext).
	ctx, cancel := recordContext(ctx, cfg.RecordGrace)
	defer cancel()
	adm.end(at, &out)
	if host != "" {
		l.hosts.Record(host, hostResult(out), at)
	}
	base.Status, base.Detail, base.Latency, base.At = out.Status, out.Detail, at.Sub(now), at
	base.Code = string(out.Code)
	l.tell(lj, out, at)
	l.record(ctx, e, lj, out, base)
}

// hostWaitMax is the longest a delivery to a throttled host waits in the lane for that host's
// own token; a longer wait goes back to the delayed set instead, so a throttled host never
// holds slots the lane's other hosts could use.
const hostWaitMax = 250 * time.Millisecond

// errHostWait says a host's own token is further off than hostWaitMax.
var errHostWait = errors.New("dispatch: host throttled")

// admission is a delivery that the breaker let through, waiting to be told how it went: the
// provider's breaker, or in a lane of client-supplied hosts (the fallback lane) the host's
// own breaker and throttle.
type admission struct {
	done   func(limits.Result) // the provider's breaker; nil in a per-host lane
	bucket *limits.Bucket      // the provider's bucket, throttled by a RATE_LIMITED answer
	permit limits.HostPermit   // the host's, in a per-host lane
}

// end tells the breaker how the delivery went: out is nil when nothing was sent (it counts
// neither way and gives a half-open probe's place back).
func (a *admission) end(now time.Time, out *taxonomy.Outcome) {
	result, limited, retryAfter := limits.Excluded, false, time.Duration(0)
	if out != nil {
		result, limited = breakerResult(*out), out.Code == taxonomy.RateLimited
		if limited || out.Code == taxonomy.ProviderDown {
			retryAfter = out.RetryAfter // the host asked for a pause; only its own jobs wait
		}
	}
	if a.done == nil {
		a.permit.Done(now, result, limited, retryAfter)
		return
	}
	a.done(result)
	if limited {
		a.bucket.Throttle(now)
	}
}

// admit asks whether a delivery may go now. In a lane of listed providers the provider's ratio
// breaker decides (a provider is one service). In the fallback lane every client-supplied host
// has its own breaker and 429 throttle (limits.HostLimits), so one bad host neither pauses nor
// slows the others; a delivery to a throttled host waits here for the host's own token only up
// to hostWaitMax. When the delivery may not go, retryIn says when to try it again (0: the lane
// is stopping, drop it where it is).
func (l *lane) admit(stop context.Context, host string) (a admission, retryIn time.Duration, err error) {
	cfg := l.cfg
	if l.lim.perHost == nil {
		done, err := l.lim.breaker.Allow()
		if err != nil { // open, or half-open with every probe out
			return admission{}, max(l.lim.breaker.OpenFor(), putBackDelay(cfg.Rand())), err
		}
		return admission{done: done, bucket: l.lim.bucket}, 0, nil
	}
	now := cfg.Now()
	p, wait, err := l.lim.perHost.Admit(host, now)
	if err == nil && wait > hostWaitMax {
		p.Cancel(now)
		err = errHostWait
	}
	if err != nil {
		return admission{}, max(wait, putBackDelay(cfg.Rand())), err
	}
	if wait > 0 {
		sleep(stop, wait)
		if stop.Err() != nil {
			p.Cancel(cfg.Now())
			return admission{}, 0, stop.Err()
		}
	}
	return admission{permit: p}, 0, nil
}

// tell hands an attempt's outcome to Config.OnAttempt, when set.
func (l *lane) tell(lj *laneJob, out taxonomy.Outcome, at time.Time) {
	if l.cfg.OnAttempt == nil {
		return
	}
	l.cfg.OnAttempt(Attempt{Provider: l.provider, JobID: lj.job.ID, Attempt: lj.attempt, Code: out.Code,
		Status: out.Status, Enqueued: lj.enqueued, At: at})
}

// stillOurs reports whether a reclaimed entry is still pending for this consumer, false when
// it is not or Redis cannot say (then it stays where it is, for a later reclaim round).
// Every state change checks its owner in its own script, but the send does not, and a
// reclaimed entry may be finished before the lane starts it: XAUTOCLAIM does not look at the
// owner, so the reclaimer can claim an entry of our own that idled past the visibility timeout
// just as the goroutine that had it finishes it, and then offer it once that goroutine has let
// go (see lane.held). Without this check the job would go out a second time.
func (l *lane) stillOurs(ctx, stop context.Context, e stream.Entry) bool {
	var owned bool
	if l.ask(ctx, stop, e, "check owner", func(ctx context.Context) (err error) {
		owned, err = l.cfg.Store.Owns(ctx, e)
		return err
	}) != nil {
		return false
	}
	if !owned {
		l.cfg.Logger.Debug("dispatch: reclaimed entry already finished or taken over; dropped",
			"shard", e.Shard, "provider", l.provider, "entry", e.ID)
	}
	return owned
}

// recordContext is the context the outcome of a send is written under. It is not cancelled
// with ctx: a push that went out must be recorded (an accepted one with its sent mark, or the
// replica that takes over the entry sends it a second time), and the write retries Redis
// errors for as long as the process runs. Once ctx is cancelled (the grace period of a
// shutdown has ended, before the write or while it runs) the write has grace more, so that a
// shutdown still ends when Redis is gone; an outcome not written by then is logged (see move).
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

// hostKey is the host breaker's key for an endpoint, or "" when the host breaker does not
// guard it. It guards the hosts no registry entry lists (the fallback lane's self-hosted and
// unknown services), which share one lane and one ratio breaker, so one dead host among them
// would otherwise hold the lane's slots for a timeout each. A listed provider's hosts are
// guarded by its ratio breaker, which pauses the lane without spending attempts; a host
// breaker there would turn a stalled provider's jobs into CIRCUIT_OPEN retries and keep its
// half-open probes from reaching it for the host cooldown.
func (l *lane) hostKey(endpoint string) string {
	route, err := l.cfg.Registry.Resolve(endpoint)
	if err != nil || !route.Unknown {
		return "" // intake refused unroutable endpoints; a registry reload may differ, and the adapter says so
	}
	return route.Authority
}

// putBack returns an entry that may not start now (its provider's breaker, the retries' share
// or its recipient's cap refused it) to the delayed set, due at due, with the same attempt:
// nothing was tried. It passes no recipient and no caps: the job already takes room in Redis
// (in the lane), so moving it to the delayed set adds nothing the caps protect, and counting it
// as its recipient's retry would dead-letter that recipient's real retries at the cap.
func (l *lane) putBack(ctx context.Context, e stream.Entry, lj *laneJob, due time.Time) {
	l.toDelayed(ctx, e, lj, stream.RetryRecord{
		ID: lj.job.ID, Provider: l.provider, Due: due, Attempt: lj.attempt,
		Job: lj.raw, EnqueuedAtMs: lj.enqueued.UnixMilli(), At: l.cfg.Now(),
	})
}

// record writes the outcome of a send: the ledger for a final outcome (plus the sent mark, or
// the gone stream), the delayed set for a retry, dead when the retries are used up.
func (l *lane) record(ctx context.Context, e stream.Entry, lj *laneJob, out taxonomy.Outcome, r stream.Result) {
	cfg, j := l.cfg, lj.job
	switch {
	case out.Code == taxonomy.Accepted:
		r.Sent = true
		l.finish(ctx, e, lj, r)
	case out.Code == taxonomy.Gone || out.Code == taxonomy.KeyMismatch:
		// The upstream must delete or renew the subscription: the gone stream tells it which.
		// Only GONE marks the endpoint, which drops the retries queued for it: an endpoint that
		// answered KEY_MISMATCH is alive, and a job signed with the key it was made with (this
		// one's retry under another vapid_key, or another job) still goes through.
		r.Gone, r.Endpoint = true, j.Subscription.Endpoint
		r.MarkGone = out.Code == taxonomy.Gone
		l.finish(ctx, e, lj, r)
	case out.Code.Retryable():
		remaining := time.Duration(j.TTL)*time.Second - r.At.Sub(lj.enqueued)
		due, v := cfg.Backoff.next(r.At, lj.attempt, out.RetryAfter, remaining, cfg.Rand())
		switch v {
		case retriesExhausted:
			l.toDead(ctx, e, lj, stream.DeadRecord{ID: j.ID, Code: string(out.Code),
				Reason:  fmt.Sprintf("gave up after %d attempts: %s", lj.attempt+1, describe(out)),
				Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: r.At})
		case retryExpired:
			r.Code = string(taxonomy.Expired)
			r.Detail = fmt.Sprintf("ttl ends before attempt %d could be made; last attempt: %s", lj.attempt+2, describe(out))
			l.finish(ctx, e, lj, r)
		default:
			l.toDelayed(ctx, e, lj, stream.RetryRecord{
				ID: j.ID, Provider: l.provider, Recipient: j.Recipient, Due: due, Attempt: lj.attempt + 1,
				Job: lj.raw, EnqueuedAtMs: lj.enqueued.UnixMilli(),
				MaxDelayed: capArg(cfg.MaxDelayed), MaxPerRecipient: capArg(cfg.MaxPerRecipient),
				Code: string(out.Code), At: r.At,
			})
		}
	default:
		l.finish(ctx, e, lj, r)
	}
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

func (l *lane) finish(ctx context.Context, e stream.Entry, lj *laneJob, r stream.Result) {
	l.move(ctx, "finish", e, lj, r.Code, func(ctx context.Context) (bool, error) { return l.cfg.Store.Finish(ctx, e, r) })
}

func (l *lane) toDead(ctx context.Context, e stream.Entry, lj *laneJob, d stream.DeadRecord) {
	l.cfg.Logger.Info("dispatch: job dead-lettered", "shard", e.Shard, "provider", l.provider,
		"id", logID(d.ID), "code", d.Code, "reason", d.Reason)
	l.move(ctx, "to dead", e, lj, d.Code, func(ctx context.Context) (bool, error) { return l.cfg.Store.ToDead(ctx, e, d) })
}

func (l *lane) toDelayed(ctx context.Context, e stream.Entry, lj *laneJob, r stream.RetryRecord) {
	var v stream.RetryVerdict
	l.move(ctx, "to delayed", e, lj, r.Code, func(ctx context.Context) (_ bool, err error) {
		v, err = l.cfg.Store.ToDelayed(ctx, e, r)
		return v != stream.NotOwner, err
	})
	switch v {
	case stream.Queued, stream.NotOwner:
	case stream.AckedCopy:
		l.cfg.Logger.Debug("dispatch: a copy of this job already waits to retry; acknowledged",
			"shard", e.Shard, "provider", l.provider, "id", r.ID)
	default:
		// Past a cap the script wrote the dead record itself, with the reason.
		l.cfg.Logger.Info("dispatch: retry refused by the delayed set; dead-lettered",
			"shard", e.Shard, "provider", l.provider, "id", r.ID, "verdict", v.String())
	}
}

// move runs one state change of e, an outcome of the job in lj (code, for the log): it retries
// Redis errors until the write goes through or ctx ends (recordContext bounds that at
// shutdown), keeping the shard's gate closed meanwhile. An outcome it could not write is
// logged, job by job: the replica that takes over the entry will send it again. It logs when
// another consumer owns the entry by now.
func (l *lane) move(ctx context.Context, what string, e stream.Entry, lj *laneJob, code string, op func(context.Context) (bool, error)) {
	var owned bool
	err := l.health.retry(ctx, nil, e.Shard, what, true, l.cfg.Now, func(ctx context.Context) (err error) {
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
	case !owned:
		l.notOwner(e)
	}
}

// ask runs a Redis call that a send waits for (a check), retrying failures until it succeeds,
// ctx ends or stop ends (the lane is stopping: the entry stays pending for another replica).
func (l *lane) ask(ctx, stop context.Context, e stream.Entry, what string, op func(context.Context) error) error {
	return l.health.retry(ctx, stop.Done(), e.Shard, what, false, l.cfg.Now, op)
}

func (l *lane) notOwner(e stream.Entry) {
	// The entry idled past the visibility timeout and another consumer claimed it; that
	// consumer records it. Nothing was changed here.
	l.cfg.Logger.Info("dispatch: entry reclaimed by another consumer before it was recorded",
		"shard", e.Shard, "provider", l.provider, "entry", e.ID)
}
