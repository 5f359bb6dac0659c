package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	jobfmt "github.com/webpush-gateway/webpush-gateway/job" // "job" names one job in this package
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// intakeParams configure the intake loop of one shard's intake of one class.
type intakeParams struct {
	cfg   *Config // shared, read-only after Run applied the defaults
	shard int
	// class is the intake's: transactional jobs and bulk ones have an intake each, read by a
	// loop each, so that no transactional job waits behind bulk ones from the producer's
	// write on. A job that names no class is of its intake's.
	class jobfmt.Class
	// limits count the arrivals per provider, which the budget loop shares slots by.
	limits *fleetLimits
	health *redisHealth
	// campaigns takes campaign entries; nil when the store holds none (campaigns.go).
	campaigns CampaignStore
	// inHand are the entries this process works on, which the reclaimer spares.
	inHand *inHand
}

// intake reads one of a shard's intakes in batches, validates each job, and moves it to its
// provider's lane of its class, or to dead with the exact reason. It never sends: a batch moves
// at Redis speed whatever the push services are doing.
type intake struct {
	intakeParams
	stopper
}

func newIntake(p intakeParams) *intake {
	return &intake{intakeParams: p, stopper: newStopper()}
}

// start runs the loop in a goroutine counted in wg.
func (in *intake) start(wg *sync.WaitGroup) {
	goCounted(wg, in.run)
}

// intakeReadBytes bounds, about, the bytes of one intake read: Redis serves one call at a time,
// and a read of IntakeBatch entries of the largest size (a campaign's recipients come 1,000 to
// an entry) would hold every other call, a transactional job's included, for tens of
// milliseconds. Each read takes as many entries as that many bytes of the largest entry of the
// read before; the first reckons with entries of the largest size allowed.
const intakeReadBytes = 256 << 10

// intakeCount is how many entries the read after one whose largest entry had largest bytes
// takes: as many as intakeReadBytes holds, at least one, at most batch.
func intakeCount(batch, largest int) int {
	return min(batch, max(1, intakeReadBytes/max(largest, 1)))
}

func (in *intake) run() {
	ctx, cancel := untilClosed(in.done)
	defer cancel()
	pool := newWorkers(in.done)
	defer pool.wait()
	cfg, log := in.cfg, in.cfg.Logger
	var backoff redisBackoff
	count := intakeCount(cfg.IntakeBatch, jobfmt.MaxEntryBytes)
	for ctx.Err() == nil {
		// No new work while the shard cannot record what happens to it (see redisHealth).
		if !in.health.waitOpen(ctx, in.shard, cfg.Block) {
			return
		}
		// The read waits for at most Block, which is what bounds how long shutdown waits for it.
		// Entries that break the entry rules are dead-lettered by the read itself, in Redis.
		entries, refused, err := cfg.Store.ReadIntake(ctx, in.shard, in.class, count, cfg.Block)
		if ctx.Err() == nil {
			in.health.observe(in.shard, telemetry.OpRead, err, cfg.Now())
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("dispatch: intake read failed; retrying", "shard", in.shard, "class", string(in.class), "err", err)
			backoff.wait(ctx, nil)
			continue
		}
		backoff.reset()
		if len(entries) > 0 {
			largest := 0
			for _, e := range entries {
				largest = max(largest, len(e.Fields["job"]))
			}
			count = intakeCount(cfg.IntakeBatch, largest)
		}
		for _, r := range refused {
			log.Info("dispatch: invalid job dead-lettered", "shard", in.shard, "id", logID(r.ID), "reason", r.Reason)
			cfg.Metrics.DeadLetter(telemetry.DeadInvalidJob)
		}
		// A batch that was read is moved even when the stop comes meanwhile: moving is quick
		// and sends nothing, and an entry left pending would wait a visibility timeout for a
		// reclaimer. Once stopped, a failed move is not retried (the retry gives up when done
		// is closed). An entry whose move fails stays pending under this consumer, so
		// moving on loses nothing. The entries are moved at once, each on a worker goroutine,
		// so that the store sends their moves in one pipeline rather than one round trip each.
		mctx := context.WithoutCancel(ctx)
		var wg sync.WaitGroup
		for _, e := range entries {
			in.inHand.add(e)
			wg.Add(1)
			pool.run(func() {
				defer wg.Done()
				defer in.inHand.done(e)
				_ = in.handle(mctx, e)
			})
		}
		wg.Wait()
	}
}

// handle validates one intake entry and moves it to its lane or to dead. The job's enqueued_at,
// when it gives none, is the entry's own time: when the producer wrote it, by Redis's clock.
func (in *intake) handle(ctx context.Context, e stream.Entry) error {
	cfg := in.cfg
	raw, ok := e.Fields["job"]
	if !ok {
		return in.dead(ctx, e, "", `entry has no "job" field`, "", true)
	}
	switch jobfmt.KindOf(raw) {
	case jobfmt.KindCreateCampaign:
		return in.createCampaign(ctx, e, raw)
	case jobfmt.KindAddRecipients:
		return in.addRecipients(ctx, e, raw)
	}
	now := cfg.Now()
	written := e.WrittenAt()
	if written.IsZero() || written.After(now) {
		written = now
	}
	job, err := jobfmt.DecodeFromIntake(raw, written, in.class)
	if err != nil {
		return in.dead(ctx, e, bestEffortID(raw), invalidReason(err), raw, true)
	}
	route, err := cfg.registry().ResolveParsed(job.Subscription.Endpoint, job.Parsed.URL(job.Subscription.Endpoint))
	if err != nil {
		return in.dead(ctx, e, job.ID, jobfmt.EndpointReason(err), raw, false)
	}
	if _, ok := cfg.Keys[job.VAPIDKey]; !ok {
		// The key name is configuration, not a secret: naming it tells the operator which
		// --vapid-key is missing.
		return in.dead(ctx, e, job.ID, fmt.Sprintf("vapid_key: no key named %q is configured", job.VAPIDKey), raw, false)
	}
	provider := route.Provider.ID
	// A send_at to come holds the job in the delayed set until then; one now or past is sent
	// at once, as a job without one.
	scheduled := job.SendAt.After(now)
	if ahead := job.SendAt.Sub(now); scheduled && ahead > cfg.MaxScheduleAhead {
		// The job is valid: kept whole, it can be replayed once the horizon is raised.
		return in.dead(ctx, e, job.ID, fmt.Sprintf("send_at: %s is %s ahead; at most %s (run --max-schedule-ahead)",
			job.SendAt.UTC().Format(time.RFC3339Nano), ahead.Round(time.Second), cfg.MaxScheduleAhead), raw, false)
	}
	var v stream.LaneVerdict
	what := "to lane"
	if scheduled {
		what = "to scheduled"
	}
	err = in.health.retry(ctx, in.done, e.Shard, telemetry.OpWrite, what, false, cfg.Now, func(ctx context.Context) (err error) {
		if scheduled {
			v, err = cfg.Store.ToScheduled(ctx, e, stream.ScheduledRecord{ID: job.ID, Provider: provider, Class: job.Class,
				Job: raw, EnqueuedAtMs: job.EnqueuedAt.UnixMilli(), SendAt: job.SendAt, At: now})
			return err
		}
		v, err = cfg.Store.ToLane(ctx, e, provider, job.Class, job.ID, raw, job.EnqueuedAt.UnixMilli())
		return err
	})
	switch {
	case err != nil:
	case v == stream.LaneNotOwner:
		in.notOwner(e)
	case v == stream.Copy:
		cfg.Logger.Debug("dispatch: copy of a job already held or sent; acknowledged", "shard", e.Shard, "id", job.ID)
	default:
		// A scheduled job arrives in its lane when it comes due, not now.
		if pl := in.limits.get(provider); pl != nil && !scheduled {
			pl.arrivals.Add(1)
		}
		if route.Unknown {
			cfg.Metrics.UnknownAuthority() // the fallback lane took it: a host no entry lists
		}
	}
	return err
}

// dead dead-letters an intake entry as INVALID_JOB: it was never sent. invalid says the job
// itself failed validation (its record keeps only its first bytes); a valid job refused for
// the configuration (its endpoint's route, its key) is kept whole, to replay once that is fixed.
func (in *intake) dead(ctx context.Context, e stream.Entry, id, reason, raw string, invalid bool) error {
	d := stream.DeadRecord{
		ID: id, Code: string(taxonomy.InvalidJob), Reason: reason, Job: raw, JobInvalid: invalid, At: in.cfg.Now(),
	}
	in.cfg.Logger.Info("dispatch: invalid job dead-lettered", "shard", e.Shard, "id", logID(id), "reason", reason)
	var owned bool
	err := in.move(ctx, "to dead", e, func(ctx context.Context) (ok bool, err error) {
		owned, err = in.cfg.Store.ToDead(ctx, e, d)
		return owned, err
	})
	if err == nil && owned {
		in.cfg.Metrics.DeadLetter(telemetry.DeadInvalidJob)
	}
	return err
}

// move runs one state change of an intake entry, retrying Redis errors until it succeeds or
// the intake stops (then the entry stays pending for this consumer or another). A false result
// means another consumer owns the entry now, which is not an error: that consumer moves it.
func (in *intake) move(ctx context.Context, what string, e stream.Entry, op func(context.Context) (bool, error)) error {
	var owned bool
	err := in.health.retry(ctx, in.done, e.Shard, telemetry.OpWrite, what, false, in.cfg.Now, func(ctx context.Context) (err error) {
		owned, err = op(ctx)
		return err
	})
	if err == nil && !owned {
		in.notOwner(e)
	}
	return err
}

func (in *intake) notOwner(e stream.Entry) {
	in.cfg.Logger.Debug("dispatch: entry reclaimed by another consumer; left to it", "stream", e.Stream, "entry", e.ID)
}

// bestEffortID is the "id" of a job that failed validation (jobfmt.PeekID), so its dead
// record can be matched by the upstream and by audit; "" when the entry has none, or when the
// id is longer than an entry may be (MaxEntryBytes: only an entry refused for its size can
// carry one, and a dead record must not grow past the cut its job gets).
func bestEffortID(raw string) string {
	if id, _ := jobfmt.PeekID([]byte(raw)); len(id) <= jobfmt.MaxEntryBytes {
		return id
	}
	return ""
}

// invalidReason is what a dead record says of a job the job package refused: its reason, which
// names the field and never quotes an endpoint or a key.
func invalidReason(err error) string {
	var ie *jobfmt.InvalidError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	return err.Error()
}

// logID is a job id as a log line shows it: an invalid id may be up to MaxEntryBytes long,
// so it is cut to MaxIDLen bytes with a note of its length. The dead record keeps it whole.
func logID(id string) string {
	if len(id) <= jobfmt.MaxIDLen {
		return id
	}
	return fmt.Sprintf("%s... (%d bytes)", id[:jobfmt.MaxIDLen], len(id))
}
