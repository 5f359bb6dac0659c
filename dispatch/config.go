package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Sender sends one message and says what came of it; *adapter.Sender is one. Declared here, by
// its only caller, so tests can put anything behind it.
type Sender interface {
	Send(ctx context.Context, m *adapter.Message) taxonomy.Outcome
}

// The defaults of the worker: of Config's zero fields that cannot be off, and of those that may
// be (the retries, the caps, the lane's gather), which the caller sets; cmd/gateway-worker's
// flags take theirs from these.
const (
	DefaultRetryBase       = 5 * time.Second
	DefaultRetryCap        = 10 * time.Minute
	DefaultMaxRetries      = 8
	DefaultMaxDelayed      = 1_000_000
	DefaultMaxPerRecipient = 1_000
	// DefaultMaxScheduleAhead is how far ahead a job's send_at may be: beyond it the job is
	// dead-lettered as INVALID_JOB rather than held in Redis for that long.
	DefaultMaxScheduleAhead  = 30 * 24 * time.Hour
	DefaultVisibilityTimeout = 60 * time.Second
	DefaultMaxDeliveries     = 5
	DefaultGrace             = 25 * time.Second
	DefaultRecordGrace       = 10 * time.Second
	DefaultBlock             = time.Second
	DefaultIntakeBatch       = 100
	DefaultPromoteEvery      = 250 * time.Millisecond
	DefaultProbeEvery        = time.Second
	DefaultReclaimEvery      = 5 * time.Second
	DefaultJanitorEvery      = 60 * time.Second
	DefaultJanitorIdle       = 10 * time.Minute
	DefaultStartupTimeout    = 2 * time.Minute
	DefaultStatsEvery        = 5 * time.Second
	DefaultLaneGather        = 20 * time.Millisecond
	// DefaultCampaignEvery is how often the expansion loop moves campaigns' recipients into
	// the lanes; DefaultCampaignLaneDepth how many entries a lane may hold before it takes no
	// more of them (a lane reads far fewer than that at once, so it never runs dry between
	// rounds, and a stalled provider's lane holds no more than that of the campaigns' jobs).
	DefaultCampaignEvery     = 100 * time.Millisecond
	DefaultCampaignLaneDepth = 2000
)

// Config is everything Run needs. As in every configuration of this project (registry.yaml and
// the flags too), 0 switches off what may be off: the retries (Backoff.MaxRetries), the caps
// (MaxDelayed, MaxPerRecipient) and the lane's gather (LaneGather); every other zero field takes
// its default (the Default* constants above, or the one its comment names). A negative duration
// or count is taken as 0.
type Config struct {
	Store    Store               // required (a *stream.Store); its Options name this process's consumer
	Sender   Sender              // required
	Registry *providers.Registry // required: lanes are its providers, routing is its Resolve
	// Campaigns takes campaigns' intake entries and expands their recipients into the lanes
	// (stream.CampaignsOf the Store); nil: campaign entries are dead-lettered as this worker
	// cannot hold them.
	Campaigns CampaignStore
	// Keys are the VAPID keys by the name jobs give in vapid_key ("default" when a job gives
	// none). Required, at least one.
	Keys map[string]*vapid.Key

	// Now is the clock for TTLs, retry due times and ledger times; default time.Now.
	Now func() time.Time
	// Rand draws the retry jitter in [0, 1); default math/rand/v2's Float64. Lane consumers call
	// it concurrently, so it must be safe for concurrent use.
	Rand func() float64
	// Backoff's Base and Cap default to DefaultRetryBase and DefaultRetryCap; its MaxRetries 0
	// means none: a retryable outcome goes to the dead stream at once (the worker's is
	// DefaultMaxRetries).
	Backoff Backoff

	// MaxDelayed caps one provider's retries in the delayed set of a shard (the retries after an
	// attempt; put-backs, which made none, neither count nor are refused), so that one
	// provider's retries cannot push out another's; MaxPerRecipient caps a recipient's jobs in
	// it; past a cap a retry goes to dead with the cap named. 0: no cap (the worker's are
	// DefaultMaxDelayed and DefaultMaxPerRecipient).
	MaxDelayed      int64
	MaxPerRecipient int64
	// MaxScheduleAhead is how far after intake reads it a job's send_at may be; a job scheduled
	// further out is dead-lettered (INVALID_JOB) with the horizon named. Scheduled jobs wait in
	// the delayed set outside both caps above, which bound retries.
	MaxScheduleAhead time.Duration

	VisibilityTimeout time.Duration // idle time before another consumer may reclaim an entry of a replica that is gone
	MaxDeliveries     int64         // deliveries of one entry before it is dead-lettered
	Grace             time.Duration // how long in-flight sends may run on after shutdown begins
	// RecordGrace is how much longer than Grace the outcomes of sends that returned may take
	// to be written, while Redis is slow or gone, before the shutdown gives them up (each one
	// logged at error level: the replica that takes over its entry sends the job again).
	RecordGrace time.Duration
	Block       time.Duration // longest blocking read, which bounds shutdown's wait for a reader
	IntakeBatch int           // intake entries per read
	// LaneGather bounds how long a lane whose provider's token bucket is the limit waits before
	// it reads more entries (0: it reads as soon as a slot is free; the worker's is
	// DefaultLaneGather). While the entries
	// the provider's lanes have started still wait for their tokens, an entry read now would
	// wait behind them, so the lane waits up to half of that queue's time (and at most
	// LaneGather) and then reads the slots freed meanwhile at once: one read for many jobs, and
	// no send later than it would have gone.
	LaneGather   time.Duration
	PromoteEvery time.Duration // how often due retries go back to their lanes
	// CampaignEvery is how often campaigns' recipients are expanded into the lanes;
	// CampaignLaneDepth how many entries a lane may hold and still take more of them (the
	// transactional lane, less: transactionalCampaignLead).
	CampaignEvery     time.Duration
	CampaignLaneDepth int
	ProbeEvery        time.Duration // how often each shard is asked whether it accepts writes
	ReclaimEvery      time.Duration // how often entries of replicas that are gone are claimed
	JanitorEvery      time.Duration // how often idle consumers are looked for
	JanitorIdle       time.Duration // a consumer idle this long with nothing pending is removed
	// StartupTimeout bounds Run's start: the consumer groups, the scripts and the first
	// heartbeat. Redis may still be starting along with the pod, so failures are retried
	// until then; past it Run returns an error, so that the process exits and its restarts
	// show.
	StartupTimeout time.Duration

	Logger *slog.Logger // default slog.Default()
	// Version is this build's version, published with the heartbeat (for `status`).
	Version string
	// Metrics, when set, get every send, breaker change, record, retry, dead letter and
	// Redis error as it happens, the providers' gauges at scrape time, and the queue gauges
	// from the statistics loop (every StatsEvery). Nil records nothing.
	Metrics *telemetry.Metrics
	// Health, when set, watches the loops that tick on their own (the heartbeat, the prober,
	// the promoter, the reclaimer, the janitor, the statistics loop: /livez) and is told
	// whether the worker is ready (/readyz: "groups" once the consumer groups exist, the
	// prober's Redis check, "draining" once the shutdown begins). Nil watches nothing.
	Health *telemetry.Health
	// Signatures, when set, reports the VAPID signatures made so far by key name, for the
	// metrics (adapter.Sender.SignaturesByKey).
	Signatures func() map[string]uint64
	// StatsEvery is how often the queue gauges are read from Redis (one script per shard).
	StatsEvery time.Duration
	// Upstream, when set, is read by the statistics loop for the upstreams' consumer groups on
	// the record streams and Redis's memory (their gauges), and at start for Redis's settings
	// (a warning when AOF is off or maxmemory unset): stream.KeyspaceOf the Store. Nil reads
	// none of them.
	Upstream UpstreamReader
	// EndpointHashKey keys the endpoint hash in the log line of every terminal outcome
	// (telemetry.EndpointHash): the same key on every replica lets lines about one endpoint be
	// found together without any of them holding it. Nil leaves the hash out.
	EndpointHashKey []byte

	// ProxyBreaker is the breaker of each egress proxy the Sender's providers go through
	// (adapter.Sender.ProxyOf); zero means DefaultProxyBreaker.
	ProxyBreaker limits.BreakerConfig
	// OnProxyBreakerChange, when set, is told every state change of a proxy's breaker, by the
	// proxy's host:port, under the same rules as OnBreakerChange.
	OnProxyBreakerChange func(proxy string, from, to limits.State)

	// OnBreakerChange, when set, is told every state change of a provider's ratio breaker
	// (for metrics and tests). It runs under the breaker's lock: it must only count or hand the
	// change on, and return.
	OnBreakerChange func(provider string, from, to limits.State)
	// OnAttempt, when set, is told the outcome of every send, and of every delivery the host
	// breaker refused (CIRCUIT_OPEN), as it happens: retried attempts included, which the
	// ledger never shows (for metrics and the demo's live table). It runs on the send's
	// goroutine: it must only count or hand the event on, and return.
	OnAttempt func(Attempt)

	live *live // made by withDefaults
}

// live is what a registry reload changes while Run runs: the registry and the sender that goes
// with it. withDefaults makes it; every loop reads them through registry and sender, and a
// send in flight keeps the sender it started with.
type live struct {
	reg    atomic.Pointer[providers.Registry]
	sender atomic.Pointer[senderBox]
}

type senderBox struct{ Sender }

// registry is the registry in force now (Registry itself before withDefaults).
func (c *Config) registry() *providers.Registry {
	if c.live == nil {
		return c.Registry
	}
	return c.live.reg.Load()
}

// sender is the sender in force now (Sender itself before withDefaults).
func (c *Config) sender() Sender {
	if c.live == nil {
		return c.Sender
	}
	return c.live.sender.Load().Sender
}

// Attempt is one delivery attempt's outcome, as Config.OnAttempt is told it.
type Attempt struct {
	Provider string
	JobID    string
	Attempt  int // 0 for the first delivery
	Code     taxonomy.Code
	Status   int // HTTP status; 0 when there was no answer
	// Enqueued is the job's enqueued_at (the time intake first read it, when the job gave
	// none); At is when the answer came. At - Enqueued is the job's time from enqueue to answer.
	Enqueued, At time.Time
}

// withDefaults checks the required fields and fills every zero field with its default.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Store == nil:
		return c, errors.New("dispatch: Config.Store is required")
	case c.Store.Consumer() == "":
		// It names this process in the consumer groups and in the replicas' heartbeats.
		return c, errors.New("dispatch: Config.Store needs a consumer name (stream.Options.Consumer)")
	case c.Sender == nil:
		return c, errors.New("dispatch: Config.Sender is required")
	case c.Registry == nil:
		return c, errors.New("dispatch: Config.Registry is required")
	case len(c.Keys) == 0:
		return c, errors.New("dispatch: Config.Keys needs at least one VAPID key")
	}
	for name, k := range c.Keys {
		if k == nil {
			return c, errors.New("dispatch: Config.Keys[" + name + "] is nil")
		}
	}
	c.live = &live{}
	c.live.reg.Store(c.Registry)
	c.live.sender.Store(&senderBox{c.Sender})
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	setDefault(&c.Backoff.Base, DefaultRetryBase)
	setDefault(&c.Backoff.Cap, DefaultRetryCap)
	c.Backoff.MaxRetries = max(c.Backoff.MaxRetries, 0)
	c.MaxDelayed, c.MaxPerRecipient = max(c.MaxDelayed, 0), max(c.MaxPerRecipient, 0)
	setDefault(&c.MaxScheduleAhead, DefaultMaxScheduleAhead)
	setDefault(&c.VisibilityTimeout, DefaultVisibilityTimeout)
	setDefault(&c.MaxDeliveries, DefaultMaxDeliveries)
	setDefault(&c.Grace, DefaultGrace)
	setDefault(&c.RecordGrace, DefaultRecordGrace)
	setDefault(&c.ProbeEvery, DefaultProbeEvery)
	setDefault(&c.Block, DefaultBlock)
	setDefault(&c.IntakeBatch, DefaultIntakeBatch)
	c.LaneGather = max(c.LaneGather, 0)
	setDefault(&c.PromoteEvery, DefaultPromoteEvery)
	setDefault(&c.CampaignEvery, DefaultCampaignEvery)
	setDefault(&c.CampaignLaneDepth, DefaultCampaignLaneDepth)
	setDefault(&c.ReclaimEvery, DefaultReclaimEvery)
	setDefault(&c.JanitorEvery, DefaultJanitorEvery)
	setDefault(&c.JanitorIdle, DefaultJanitorIdle)
	setDefault(&c.StartupTimeout, DefaultStartupTimeout)
	setDefault(&c.StatsEvery, DefaultStatsEvery)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Backoff.Cap < c.Backoff.Base {
		c.Backoff.Cap = c.Backoff.Base
	}
	return c, nil
}

// setDefault sets *p to def when *p is the zero value (or negative, for numbers).
func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
		return
	}
	switch v := any(p).(type) {
	case *time.Duration:
		if *v < 0 {
			*p = def
		}
	case *int:
		if *v < 0 {
			*p = def
		}
	case *int64:
		if *v < 0 {
			*p = def
		}
	}
}
