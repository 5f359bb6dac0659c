package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// laneStore is what a lane needs of Redis: its reads and the state changes of its entries.
// *stream.Store is one; the lane's unit tests use one of their own.
type laneStore interface {
	ReadLane(ctx context.Context, shard int, provider string, count int, block time.Duration) ([]stream.Entry, error)
	WasSent(ctx context.Context, shard int, id string) (bool, error)
	IsGone(ctx context.Context, shard int, endpoint string) (bool, error)
	Owns(ctx context.Context, e stream.Entry) (bool, error)
	Finish(ctx context.Context, e stream.Entry, r stream.Result) (bool, error)
	ToDead(ctx context.Context, e stream.Entry, d stream.DeadRecord) (bool, error)
	ToDelayed(ctx context.Context, e stream.Entry, r stream.RetryRecord) (stream.RetryVerdict, error)
	AckSent(ctx context.Context, e stream.Entry, jobID string) (bool, error)
}

// handle is the life of one lane entry, in four steps: check (the looks at Redis that may end
// it without a send, and the decision, beforeSend), admit (the host breaker, the provider's
// breaker or the host's own limits, the token), send, and record (afterSend's decision,
// applied). ctx is the send's context, cancelled only when the grace period of a shutdown
// ends; stop is the reader's, cancelled when the lane is told to stop: an entry still waiting
// for its token, or for Redis to answer a check, then stays pending for another replica, like
// the entries read and never started. lj and reason are parseLaneEntry's; reclaimed says the
// reclaimer handed e over; readAt is when the lane took it (real time).
func (l *lane) handle(ctx, stop context.Context, e stream.Entry, lj *laneJob, reason string, reclaimed bool, readAt time.Time) {
	tok := tokenWait{pl: l.lim}
	defer tok.leave()
	end, ok := l.check(ctx, stop, e, lj, reason, reclaimed)
	if !ok {
		return
	}
	if end != nil {
		l.apply(ctx, e, lj, *end)
		return
	}
	adm, ok := l.admit(ctx, stop, e, lj, readAt, &tok)
	if !ok {
		return
	}
	began := l.cfg.Now()
	out := l.cfg.sender().Send(ctx, l.message(lj, began))
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
	l.tell(lj, out, began, at)
	r := stream.Result{ID: lj.job.ID, Provider: l.provider, Attempt: lj.attempt, Code: string(out.Code),
		Status: out.Status, Detail: out.Detail, Latency: at.Sub(began), At: at,
		// While entries wait for the provider's tokens, the slot this record holds delays no
		// send: the record may wait for others (Config.CommitLinger).
		Linger: l.lim.tokenQueue() > 0}
	l.apply(ctx, e, lj, l.afterSend(lj, out, r))
}

// check looks at what may end an entry without a send and decides (beforeSend). A job that was
// accepted by another attempt meanwhile is acknowledged without a second send; only a retry or
// a reclaimed entry can be one (intake moves no copy of a held or sent job into a lane), so a
// first delivery needs no look. ok is false when the entry must be left as it is: it is not
// ours any more, or Redis did not answer before the lane stopped.
func (l *lane) check(ctx, stop context.Context, e stream.Entry, lj *laneJob, reason string, reclaimed bool) (end *write, ok bool) {
	if reclaimed && !l.stillOurs(ctx, stop, e) {
		return nil, false
	}
	var f facts
	if reason == "" && (lj.attempt > 0 || reclaimed) {
		if l.ask(ctx, stop, e, "check sent mark", func(ctx context.Context) (err error) {
			f.sent, err = l.store.WasSent(ctx, e.Shard, lj.job.ID)
			return err
		}) != nil {
			return nil, false
		}
	}
	if reason == "" && lj.attempt > 0 && !f.sent {
		if l.ask(ctx, stop, e, "check gone mark", func(ctx context.Context) (err error) {
			f.gone, err = l.store.IsGone(ctx, e.Shard, lj.job.Subscription.Endpoint)
			return err
		}) != nil {
			return nil, false
		}
	}
	return l.beforeSend(lj, reason, f, l.cfg.Now()), true
}

// admit takes the entry through admission: the host breaker of unknown hosts (a skipped host's
// delivery is recorded as CIRCUIT_OPEN), the provider's breaker or the host's own limits (a
// refusal puts the entry back: no attempt, no slot held), then the provider's token. The
// breakers come before the bucket: a delivery they refuse sends nothing, so it must not spend
// the provider's rate (a dead self-hosted server with a backlog would otherwise eat the
// fallback lane's tokens). An entry that waited here (for a slot, for a token) for half the
// visibility timeout may have been reclaimed by another replica meanwhile, which would send it
// too: it is looked at again. ok is false when the entry's turn ended here.
func (l *lane) admit(ctx, stop context.Context, e stream.Entry, lj *laneJob, readAt time.Time, tok *tokenWait) (adm admission, ok bool) {
	cfg := l.cfg
	host := l.hostKey(lj.job.Subscription.Endpoint)
	if host != "" && !l.hosts.Allow(host, cfg.Now()) {
		tok.leave()
		out := taxonomy.Local(l.provider, taxonomy.CircuitOpen, "host "+host+" is skipped after repeated transport failures")
		now := cfg.Now()
		l.tell(lj, out, time.Time{}, now)
		r := stream.Result{ID: lj.job.ID, Provider: l.provider, Attempt: lj.attempt, Code: string(out.Code), Detail: out.Detail, At: now}
		l.apply(ctx, e, lj, l.afterSend(lj, out, r))
		return admission{}, false
	}
	adm, retryIn, err := l.gate(stop, host)
	if err != nil {
		tok.leave()
		if retryIn > 0 {
			now := cfg.Now()
			l.apply(ctx, e, lj, l.putBack(lj, now.Add(retryIn), now))
		}
		return admission{}, false
	}
	adm.host, adm.hosts = host, l.hosts
	if l.lim.waitToken(stop, cfg.Now) != nil {
		adm.end(cfg.Now(), nil) // stopping before the send: nothing was sent
		return admission{}, false
	}
	tok.leave()
	if time.Since(readAt) > l.recheckAfter && !l.stillOurs(ctx, stop, e) {
		adm.end(cfg.Now(), nil)
		return admission{}, false
	}
	now := cfg.Now()
	base := stream.Result{ID: lj.job.ID, Provider: l.provider, Attempt: lj.attempt}
	if r, ok := l.expired(lj, base, now); ok { // the token took the last of the TTL
		adm.end(now, nil)
		l.apply(ctx, e, lj, write{kind: writeFinish, result: r})
		return admission{}, false
	}
	return adm, true
}

// message is the push for job lj sent at now, with the TTL that remains.
func (l *lane) message(lj *laneJob, now time.Time) *adapter.Message {
	j := lj.job
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(lj.enqueued)
	return &adapter.Message{
		ID: j.ID, Subscription: j.Subscription,
		Payload: j.Payload, Ciphertext: j.Ciphertext,
		TTL: max(0, int(remaining/time.Second)), Urgency: j.Urgency, Topic: j.Topic, Key: l.cfg.Keys[j.VAPIDKey],
		Provider: l.provider,
	}
}

// tokenWait counts an entry as queued for a token (see providerLimits.readable) until it has
// one or leaves without needing one. Owned by the entry's goroutine.
type tokenWait struct {
	pl   *providerLimits
	left bool
}

func (t *tokenWait) leave() {
	if !t.left {
		t.left = true
		t.pl.queued.Add(-1)
	}
}

// tell hands an attempt's outcome to the metrics (a send, with its duration: began is when it
// started, zero for a delivery refused before any request, which the metrics count no send)
// and to Config.OnAttempt, when set.
func (l *lane) tell(lj *laneJob, out taxonomy.Outcome, began, at time.Time) {
	if !began.IsZero() {
		l.cfg.Metrics.Send(l.provider, string(out.Code), at.Sub(began), lj.job.ID)
	}
	if l.cfg.OnAttempt == nil {
		return
	}
	l.cfg.OnAttempt(Attempt{Provider: l.provider, JobID: lj.job.ID, Attempt: lj.attempt, Code: out.Code,
		Status: out.Status, Enqueued: lj.enqueued, At: at})
}

// stillOurs reports whether an entry is still pending for this consumer, false when it is not
// or Redis cannot say (then it stays where it is, for a later reclaim round). Every state change
// checks its owner in its own script, but the send does not: a reclaimed entry may be finished
// before the lane starts it (the reclaimer can claim an entry of our own that idled past the
// visibility timeout just as the goroutine that had it finishes it, and offer it once that
// goroutine has let go: see lane.held), and an entry held here long may have been taken over.
// Without this look the job would go out a second time.
func (l *lane) stillOurs(ctx, stop context.Context, e stream.Entry) bool {
	var owned bool
	if l.ask(ctx, stop, e, "check owner", func(ctx context.Context) (err error) {
		owned, err = l.store.Owns(ctx, e)
		return err
	}) != nil {
		return false
	}
	if !owned {
		l.cfg.Logger.Debug("dispatch: entry already finished or taken over; dropped",
			"shard", e.Shard, "provider", l.provider, "entry", e.ID)
	}
	return owned
}

// ask runs a Redis call that a send waits for (a check), retrying failures until it succeeds,
// ctx ends or stop ends (the lane is stopping: the entry stays pending for another replica).
func (l *lane) ask(ctx, stop context.Context, e stream.Entry, what string, op func(context.Context) error) error {
	return l.health.retry(ctx, stop.Done(), e.Shard, telemetry.OpCheck, what, false, l.cfg.Now, op)
}

// recordContext is the context the outcome of a send is written under. It is not cancelled
// with ctx: a push that went out must be recorded (an accepted one with its sent mark, or the
// replica that takes over the entry sends it a second time), and the write retries Redis
// errors for as long as the process runs. Once ctx is cancelled (the grace period of a
// shutdown has ended, before the write or while it runs) the write has grace more, so that a
// shutdown still ends when Redis is gone; an outcome not written by then is logged (apply).
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

// hostKey is the host breaker's key for an endpoint, or "" when the host breaker does not
// guard it. It guards the hosts no registry entry lists (the fallback lane's self-hosted and
// unknown services), which share one lane, so one dead host among them would otherwise hold
// the lane's slots for a timeout each. A listed provider's hosts are guarded by its ratio
// breaker, which pauses the lane without spending attempts; a host breaker there would turn a
// stalled provider's jobs into CIRCUIT_OPEN retries and keep its half-open probes from
// reaching it for the host cooldown.
func (l *lane) hostKey(endpoint string) string {
	route, err := l.cfg.registry().Resolve(endpoint)
	if err != nil || !route.Unknown {
		return "" // intake refused unroutable endpoints; a registry reload may differ, and the adapter says so
	}
	return route.Authority
}
