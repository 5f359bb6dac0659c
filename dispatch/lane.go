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

// goneMeanwhile is the ledger detail of a retry dropped because its endpoint was reported gone
// after the job's first attempt.
const goneMeanwhile = "endpoint reported gone meanwhile; not retried"

// recordAfterAbort is how long an accepted send may still take to be recorded after the grace
// period cancelled it: without the record (and its sent mark) a reclaiming replica would send
// the job a second time.
const recordAfterAbort = time.Second

// laneParams configure the consumer of one (shard, provider) lane.
type laneParams struct {
	cfg      *Config // shared, read-only after Run applied the defaults
	shard    int
	provider string
	// sem is the provider's in-flight budget, shared by its lanes on every shard.
	sem *limits.Semaphore
	// abort is closed when the grace period ends; it cancels the sends still in flight.
	abort <-chan struct{}
}

// lane reads a provider's lane stream on one shard, never more entries than the provider has
// free in-flight slots, and sends each entry in its own goroutine holding one slot. A stalled
// provider fills its slots and its lanes stop reading: its jobs wait in Redis, and the other
// providers' lanes are untouched.
type lane struct {
	laneParams
	stopper
	// offered carries entries the reclaimer claimed for this lane to the reader, which starts
	// them like the ones it reads. Buffered to the semaphore's size; the reclaimer never offers
	// more than there is room for.
	offered chan stream.Entry
	// inflight counts the send goroutines; the reader goroutine waits for it before it returns.
	inflight sync.WaitGroup

	mu sync.Mutex
	// held are the ids of entries this lane has read or been offered and not finished. XAUTOCLAIM
	// does not look at the owner, so an entry of ours that idles past the visibility timeout
	// (waiting for a slot, or for Redis) is claimed again by our own reclaimer; held keeps it
	// from being sent twice in this process. Guarded by mu.
	held map[string]struct{}
}

func newLane(p laneParams) *lane {
	return &lane{laneParams: p, stopper: newStopper(), offered: make(chan stream.Entry, p.sem.Cap()),
		held: make(map[string]struct{})}
}

// start runs the reader in a goroutine counted in wg. That goroutine returns only after every
// send it started has returned, so wg also covers the sends.
func (l *lane) start(wg *sync.WaitGroup) {
	goCounted(wg, l.run)
}

// room is how many reclaimed entries the lane can take now.
func (l *lane) room() int { return min(l.sem.Free(), cap(l.offered)-len(l.offered)) }

// offer hands a reclaimed entry to the reader; false when there is no room, in which case
// the entry stays pending and a later reclaim round takes it. An entry this lane already holds
// is taken as handed over: the goroutine that has it finishes it.
func (l *lane) offer(e stream.Entry) bool {
	if !l.hold(e.ID) {
		return true
	}
	select {
	case l.offered <- e:
		return true
	default:
		l.release(e.ID)
		return false
	}
}

// hold marks an entry as in this lane's hands; false when it already was.
func (l *lane) hold(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[id]; ok {
		return false
	}
	l.held[id] = struct{}{}
	return true
}

func (l *lane) release(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, id)
}

func (l *lane) run() {
	ctx, cancel := untilClosed(l.done)
	defer cancel()
	sendCtx, cancelSends := untilClosed(l.abort)
	defer func() {
		l.inflight.Wait()
		cancelSends()
	}()
	cfg, log := l.cfg, l.cfg.Logger
	var p pause
	for ctx.Err() == nil {
		// Reclaimed entries first: they have waited a visibility timeout already.
		if !l.startOffered(ctx, sendCtx) {
			return
		}
		if l.sem.Free() == 0 {
			// Wait for a slot without keeping it, then read as many as are free then.
			if l.sem.Acquire(ctx) != nil {
				return
			}
			l.sem.Release()
			continue
		}
		entries, err := cfg.Store.ReadLane(ctx, l.shard, l.provider, l.sem.Free(), cfg.Block)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("dispatch: lane read failed; retrying", "shard", l.shard, "provider", l.provider, "err", err)
			p.wait(ctx, nil)
			continue
		}
		p.reset()
		for _, e := range entries {
			l.hold(e.ID) // a fresh read: no one else in this process has it
			if !l.dispatch(ctx, sendCtx, e) {
				return // stopping: the rest were never started and stay pending
			}
		}
	}
}

func (l *lane) startOffered(ctx, sendCtx context.Context) bool {
	for {
		select {
		case e := <-l.offered:
			if !l.dispatch(ctx, sendCtx, e) {
				return false
			}
		default:
			return true
		}
	}
}

// dispatch takes a slot for e and sends it in a new goroutine. The lanes of other shards share
// the semaphore, so the slot counted free before the read may be gone: then it waits for one,
// and gives up (leaving e pending) when the lane is told to stop.
func (l *lane) dispatch(ctx, sendCtx context.Context, e stream.Entry) bool {
	if l.sem.TryAcquire() != nil {
		if l.sem.Acquire(ctx) != nil {
			return false
		}
	}
	l.inflight.Add(1)
	go func() {
		defer l.inflight.Done()
		defer l.sem.Release()
		defer l.release(e.ID)
		l.handle(sendCtx, e)
	}()
	return true
}

// laneJob is a lane entry decoded.
type laneJob struct {
	raw      string
	job      *stream.Job
	attempt  int
	enqueued time.Time // fixed at intake: every attempt's TTL is counted from it
}

// parseLaneEntry reads the fields intake (or the promoter) wrote. A failure means the entry
// was written by something else than this gateway; the reason says what is wrong.
func parseLaneEntry(e stream.Entry, now time.Time) (*laneJob, string) {
	lj := &laneJob{raw: e.Fields["job"]}
	if lj.raw == "" {
		return lj, `lane entry has no "job" field`
	}
	var err error
	if lj.attempt, err = strconv.Atoi(e.Fields["attempt"]); err != nil || lj.attempt < 0 {
		return lj, `lane entry: "attempt" is not a whole number`
	}
	ms, err := strconv.ParseInt(e.Fields["enqueued_at"], 10, 64)
	if err != nil {
		return lj, `lane entry: "enqueued_at" is not unix milliseconds`
	}
	lj.enqueued = time.UnixMilli(ms)
	lj.job, err = stream.DecodeJob([]byte(lj.raw), now)
	if err != nil {
		var ie *stream.InvalidJobError
		if errors.As(err, &ie) {
			return lj, ie.Reason
		}
		return lj, err.Error()
	}
	return lj, ""
}

// handle is the life of one lane entry: the checks that may spare a send, the send, and the
// one state change that records its outcome. ctx is cancelled only when the grace period of a
// shutdown ends.
func (l *lane) handle(ctx context.Context, e stream.Entry) {
	cfg := l.cfg
	lj, reason := parseLaneEntry(e, cfg.Now())
	if reason != "" {
		id := bestEffortID(lj.raw)
		l.toDead(ctx, e, stream.DeadRecord{ID: id, Code: string(taxonomy.InvalidJob), Reason: reason,
			Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: cfg.Now()})
		return
	}
	j := lj.job

	// A copy of a job already accepted (a duplicate XADD, or an entry reclaimed from a replica
	// that recorded it) is acknowledged without a second send; the first one wrote the ledger.
	var sent bool
	if l.ask(ctx, "check sent mark", func(ctx context.Context) (err error) {
		sent, err = cfg.Store.WasSent(ctx, e.Shard, j.ID)
		return err
	}) != nil {
		return
	}
	if sent {
		l.move(ctx, "ack sent copy", e, func(ctx context.Context) (bool, error) { return cfg.Store.AckSent(ctx, e) })
		return
	}
	base := stream.Result{ID: j.ID, Provider: l.provider, Attempt: lj.attempt}
	if lj.attempt > 0 {
		var gone bool
		if l.ask(ctx, "check gone mark", func(ctx context.Context) (err error) {
			gone, err = cfg.Store.IsGone(ctx, e.Shard, j.Subscription.Endpoint)
			return err
		}) != nil {
			return
		}
		if gone {
			r := base
			r.Code, r.Detail, r.At = string(taxonomy.Gone), goneMeanwhile, cfg.Now()
			l.finish(ctx, e, r)
			return
		}
	}
	now := cfg.Now()
	remaining := time.Duration(j.TTL)*time.Second - now.Sub(lj.enqueued)
	// TTL 0 means "now or never" (RFC 8030 section 5.2): its first attempt goes out with TTL 0
	// however long it queued, since any queueing at all would otherwise expire every such job;
	// it is never retried (next gives EXPIRED for any delay).
	if remaining <= 0 && (j.TTL > 0 || lj.attempt > 0) {
		r := base
		r.Code, r.At = string(taxonomy.Expired), now
		r.Detail = fmt.Sprintf("ttl of %ds ran out in the queue before attempt %d; not sent", j.TTL, lj.attempt+1)
		l.finish(ctx, e, r)
		return
	}
	key := cfg.Keys[j.VAPIDKey]
	if key == nil {
		// Intake checked the name; this replica may run with other keys than the one that did.
		l.toDead(ctx, e, stream.DeadRecord{ID: j.ID, Code: string(taxonomy.InvalidJob),
			Reason:  fmt.Sprintf("vapid_key: no key named %q is configured", j.VAPIDKey),
			Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: now})
		return
	}
	m := &adapter.Message{
		ID: j.ID, Subscription: adapter.Subscription(j.Subscription), // same fields: checked by the compiler
		Payload: j.Payload, Ciphertext: j.Ciphertext,
		TTL: max(0, int(remaining/time.Second)), Urgency: j.Urgency, Topic: j.Topic, Key: key,
	}

	out := cfg.Sender.Send(ctx, m)
	done := cfg.Now()
	if ctx.Err() != nil {
		if out.Code != taxonomy.Accepted {
			// We cut the attempt short ourselves; it says nothing about the provider. The entry
			// stays pending and another replica sends it.
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), recordAfterAbort)
		defer cancel()
	}
	base.Status, base.Detail, base.Latency, base.At = out.Status, out.Detail, done.Sub(now), done
	base.Code = string(out.Code)
	l.record(ctx, e, lj, out, base)
}

// record writes the outcome of a send: the ledger for a final outcome (plus the sent mark, or
// the gone stream), the delayed set for a retry, dead when the retries are used up.
func (l *lane) record(ctx context.Context, e stream.Entry, lj *laneJob, out taxonomy.Outcome, r stream.Result) {
	cfg, j := l.cfg, lj.job
	switch {
	case out.Code == taxonomy.Accepted:
		r.Sent = true
		l.finish(ctx, e, r)
	case out.Code == taxonomy.Gone || out.Code == taxonomy.KeyMismatch:
		// The upstream must delete or renew the subscription: the gone stream tells it which.
		r.Gone, r.Endpoint = true, j.Subscription.Endpoint
		l.finish(ctx, e, r)
	case out.Code.Retryable():
		remaining := time.Duration(j.TTL)*time.Second - r.At.Sub(lj.enqueued)
		due, v := cfg.Backoff.next(r.At, lj.attempt, out.RetryAfter, remaining, cfg.Rand())
		switch v {
		case retriesExhausted:
			l.toDead(ctx, e, stream.DeadRecord{ID: j.ID, Code: string(out.Code),
				Reason:  fmt.Sprintf("gave up after %d attempts: %s", lj.attempt+1, describe(out)),
				Attempt: lj.attempt, Provider: l.provider, Job: lj.raw, At: r.At})
		case retryExpired:
			r.Code = string(taxonomy.Expired)
			r.Detail = fmt.Sprintf("ttl ends before attempt %d could be made; last attempt: %s", lj.attempt+2, describe(out))
			l.finish(ctx, e, r)
		default:
			l.toDelayed(ctx, e, stream.RetryRecord{
				ID: j.ID, Provider: l.provider, Recipient: j.Recipient, Due: due, Attempt: lj.attempt + 1,
				Job: lj.raw, EnqueuedAtMs: lj.enqueued.UnixMilli(),
				MaxDelayed: capArg(cfg.MaxDelayed), MaxPerRecipient: capArg(cfg.MaxPerRecipient),
				Code: string(out.Code), At: r.At,
			})
		}
	default:
		l.finish(ctx, e, r)
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

func (l *lane) finish(ctx context.Context, e stream.Entry, r stream.Result) {
	l.move(ctx, "finish", e, func(ctx context.Context) (bool, error) { return l.cfg.Store.Finish(ctx, e, r) })
}

func (l *lane) toDead(ctx context.Context, e stream.Entry, d stream.DeadRecord) {
	l.cfg.Logger.Info("dispatch: job dead-lettered", "shard", e.Shard, "provider", l.provider,
		"id", d.ID, "code", d.Code, "reason", d.Reason)
	l.move(ctx, "to dead", e, func(ctx context.Context) (bool, error) { return l.cfg.Store.ToDead(ctx, e, d) })
}

func (l *lane) toDelayed(ctx context.Context, e stream.Entry, r stream.RetryRecord) {
	var v stream.RetryVerdict
	err := l.ask(ctx, "to delayed", func(ctx context.Context) (err error) {
		v, err = l.cfg.Store.ToDelayed(ctx, e, r)
		return err
	})
	if err != nil {
		return
	}
	switch v {
	case stream.Queued:
	case stream.NotOwner:
		l.notOwner(e)
	default:
		// Past a cap (or for a second copy of an id already waiting) the script wrote the dead
		// record itself, with the reason.
		l.cfg.Logger.Info("dispatch: retry refused by the delayed set; dead-lettered",
			"shard", e.Shard, "provider", l.provider, "id", r.ID, "verdict", v)
	}
}

// move runs one state change of e and logs when another consumer owns the entry by now.
func (l *lane) move(ctx context.Context, what string, e stream.Entry, op func(context.Context) (bool, error)) {
	var owned bool
	if l.ask(ctx, what, func(ctx context.Context) (err error) {
		owned, err = op(ctx)
		return err
	}) == nil && !owned {
		l.notOwner(e)
	}
}

// ask runs a Redis call, retrying failures for up to the visibility timeout: past it the entry
// may be reclaimed by another consumer anyway, and the slot is better given back.
func (l *lane) ask(ctx context.Context, what string, op func(context.Context) error) error {
	return retryRedis(ctx, nil, l.cfg.Logger, what, l.cfg.VisibilityTimeout, op)
}

func (l *lane) notOwner(e stream.Entry) {
	// The entry idled past the visibility timeout and another consumer claimed it; that
	// consumer records it. Nothing was changed here.
	l.cfg.Logger.Info("dispatch: entry reclaimed by another consumer before it was recorded",
		"shard", e.Shard, "provider", l.provider, "entry", e.ID)
}
