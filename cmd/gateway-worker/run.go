package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// maxBlockingReaders bounds the readers of one worker (shards x (1 + providers)), each of which
// holds a Redis connection while it blocks: more would exhaust Redis's connections with a few
// replicas.
const maxBlockingReaders = 4096

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker run", stderr, cli.Help{
		Usage:   "--redis URL --vapid-key [NAME=]FILE --subject URL [flags]",
		Summary: "The worker: take jobs from the Redis streams of --prefix, send each to its push service, and record every outcome. Run as many replicas as you need; SIGTERM drains the sends in flight within --grace.",
		Examples: []string{
			"gateway-worker run --redis redis://127.0.0.1:6379/0 --vapid-key vapid.pem --subject mailto:ops@example.com",
			"gateway-worker run --redis redis+cluster://h1:6379,h2:6379 --shards 4 --vapid-key /secrets/vapid.pem \\",
			"    --vapid-key legacy=/secrets/old.pem --subject mailto:ops@example.com --registry /etc/gateway/registry.yaml",
		},
		Exit: "1 the worker stopped on an error (Redis could not be set up within --startup-timeout, or refused)",
	})
	var (
		rf       redisFlags
		tf       cli.Transport
		keySpecs cli.ListFlag
		cfg      dispatch.Config
		so       stream.Options
	)
	rf.register(fs)
	fs.IntVar(&so.ReshardFrom, "reshard-from", 0, "while changing the shard count of a live system: the `COUNT` the prefix had before --shards; the worker also reads that count's shards and records --shards in its place (docs/operations.md)")
	tf.Register(fs) // Delivery, then VAPID
	fs.Var(&keySpecs, "vapid-key", "VAPID private key as [NAME=]`FILE` (PEM, or the raw base64url key; FILE may also be the key itself; NAME is at most 32 characters); repeat for every key name jobs may give in vapid_key")
	fs.Require("vapid-key", "subject")
	fs.Group("Delivery")
	jobHeader := fs.String("job-id-header", "", "send each job's id in this request `HEADER` (for simulators; off in production)")
	fs.Group("Retries and limits")
	fs.DurationVar(&cfg.Backoff.Base, "retry-base", dispatch.DefaultRetryBase, "first retry delay, doubling each attempt")
	fs.DurationVar(&cfg.Backoff.Cap, "retry-cap", dispatch.DefaultRetryCap, "longest retry delay")
	fs.IntVar(&cfg.Backoff.MaxRetries, "max-retries", dispatch.DefaultMaxRetries, "retries after the first attempt (0: none)")
	fs.Int64Var(&cfg.MaxDelayed, "max-delayed", dispatch.DefaultMaxDelayed, "retries of one provider a shard's delayed set holds before that provider's retries go to dead; put-backs without an attempt and scheduled jobs count toward none (0: no cap)")
	fs.DurationVar(&cfg.MaxScheduleAhead, "max-schedule-ahead", dispatch.DefaultMaxScheduleAhead, "how far after intake a job's send_at may be; a job scheduled further out goes to dead as INVALID_JOB (at most 8784h)")
	fs.IntVar(&cfg.CampaignLaneDepth, "campaign-lane-depth", dispatch.DefaultCampaignLaneDepth, "entries a provider's lane may hold and still take more of a campaign's recipients (the rest wait in the campaign's list, subscriptions only); a transactional campaign's lane holds at most a quarter second's work at the provider's rate")
	fs.Int64Var(&cfg.MaxPerRecipient, "max-per-recipient", dispatch.DefaultMaxPerRecipient, "one recipient's jobs in the delayed set before its retries go to dead (0: no cap)")
	fs.DurationVar(&cfg.VisibilityTimeout, "visibility-timeout", dispatch.DefaultVisibilityTimeout, "idle time after which another worker reclaims an entry")
	fs.Int64Var(&cfg.MaxDeliveries, "max-deliveries", dispatch.DefaultMaxDeliveries, "deliveries of one entry before it goes to dead")
	fs.Group("Records")
	fs.DurationVar(&so.SentTTL, "sent-ttl", stream.DefaultSentTTL, "how long an accepted job's id is remembered: a redelivered or re-enqueued copy within it is not sent again")
	fs.DurationVar(&so.GoneTTL, "gone-ttl", stream.DefaultGoneTTL, "how long an endpoint reported gone is remembered, so its queued retries are dropped")
	fs.Int64Var(&so.ResultsMaxLen, "results-maxlen", stream.DefaultResultsMaxLen, "keep the ledger stream at about this many records, never trimming what an upstream's consumer group has not read and acknowledged (0: no bound; the upstream trims it)")
	fs.Int64Var(&so.GoneMaxLen, "gone-maxlen", stream.DefaultGoneMaxLen, "keep the gone stream at about this many records, as --results-maxlen (0: no bound)")
	fs.Int64Var(&so.DeadMaxLen, "dead-maxlen", stream.DefaultDeadMaxLen, "keep the dead stream at about this many records, as --results-maxlen (0: no bound)")
	fs.Group("Timing and shutdown")
	fs.DurationVar(&cfg.Grace, "grace", dispatch.DefaultGrace, "how long in-flight sends may finish after SIGTERM")
	fs.DurationVar(&cfg.RecordGrace, "record-grace", dispatch.DefaultRecordGrace, "how much longer than --grace the outcomes of answered sends may wait for Redis before shutdown gives them up (each logged)")
	fs.DurationVar(&cfg.Block, "block", dispatch.DefaultBlock, "longest blocking read (bounds how long shutdown waits for a reader)")
	fs.DurationVar(&cfg.ReclaimEvery, "reclaim-every", dispatch.DefaultReclaimEvery, "how often entries of dead workers are reclaimed")
	fs.DurationVar(&cfg.PromoteEvery, "promote-every", dispatch.DefaultPromoteEvery, "how often due retries return to their lanes")
	fs.DurationVar(&cfg.StartupTimeout, "startup-timeout", dispatch.DefaultStartupTimeout, "give up (exit 1) when Redis cannot be set up within this time; refused credentials exit at once")
	fs.Group("Batching")
	fs.DurationVar(&so.CommitLinger, "commit-linger", stream.DefaultCommitLinger, "longest a shard's shared pipeline of records waits for others to join it, while its provider's entries wait for tokens (0: not at all); no send waits for it")
	fs.DurationVar(&cfg.LaneGather, "lane-gather", dispatch.DefaultLaneGather, "longest a lane waits to read while the entries it started still wait for their provider's tokens (0: read as soon as a slot is free)")
	fs.Group("Live registry")
	registryEvery := fs.Duration("registry-check-every", providers.DefaultWatchEvery, "how often the --registry file is read for changes, applied once it has read the same for a second and twice (0: only on SIGHUP; write a new file and rename it over, see docs/operations.md)")
	fs.Group("Observability")
	httpAddr := fs.String("http", telemetry.DefaultAddr, "serve /metrics, /livez and /readyz on `ADDR` (\"\": no listener)")
	pprofOn := fs.Bool("pprof", false, "also serve Go's profiles under /debug/pprof/ on --http")
	redisFresh := fs.Duration("redis-check-fresh", telemetry.DefaultRedisFreshness, "how long a successful background Redis check keeps /readyz ready")
	fs.DurationVar(&cfg.StatsEvery, "stats-every", dispatch.DefaultStatsEvery, "how often the queue gauges are read from Redis (one script per shard)")
	consumer := fs.String("consumer", "", "consumer `NAME` in the group (default: $POD_NAME or the host name, plus a random suffix)")
	logFormat := fs.String("log-format", telemetry.LogJSON, "`FORMAT` of the log lines on stderr: json or text")
	logLevel := fs.String("log-level", "info", "`LEVEL`: debug, info, warn or error")
	statsFile := fs.String("stats-file", "", "when the worker stops, write what it did as JSON to `FILE`: Redis round trips and commands it sent, VAPID signatures it made")
	profile := fs.String("cpu-profile", "", "write a CPU profile (go tool pprof) of the whole run to `FILE`")
	gcPercent := fs.Int("gogc", cli.DefaultGOGC, "garbage collection target `PERCENT`, as Go's GOGC (which wins when set); see docs/operations.md")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	// SIGHUP reloads the registry; caught from here to the end, so that it never ends the
	// process (its default action), least of all while the sends in flight drain.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fail := fs.Fail
	if err := rf.check(); err != nil {
		return fail(err)
	}
	if so.ReshardFrom != 0 && (so.ReshardFrom < 1 || so.ReshardFrom > stream.MaxShards || so.ReshardFrom == rf.shards) {
		return fail(fmt.Errorf("--reshard-from must be 1 to %d and differ from --shards %d, got %d", stream.MaxShards, rf.shards, so.ReshardFrom))
	}
	// The worker reads the shards of both counts while the count changes.
	readShards := max(rf.shards, so.ReshardFrom)
	// The worker's live heap is small (jobs in flight, a few MB) and it allocates quickly, so
	// Go's default target of 100% collects many times a second; 400% trades a few more MB for
	// most of that CPU (BENCHMARKS.md, docs/operations.md).
	if os.Getenv("GOGC") == "" {
		if *gcPercent < 10 {
			return fail(fmt.Errorf("--gogc must be at least 10"))
		}
		debug.SetGCPercent(*gcPercent)
	}
	if err := checkRunFlags(&cfg, &so, *registryEvery, *redisFresh); err != nil {
		return fail(err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(fmt.Errorf("--log-level: %w", err))
	}
	logger, err := telemetry.NewLogger(stderr, *logFormat, level)
	if err != nil {
		return fail(fmt.Errorf("--log-format: %w", err))
	}
	keys, err := vapid.LoadKeySpecs(keySpecs)
	if err != nil {
		return fail(fmt.Errorf("--vapid-key: %w", err))
	}
	var watcher *providers.Watcher
	var reg *providers.Registry
	if tf.Registry == "" {
		reg, err = cli.LoadRegistry("")
	} else {
		watcher = providers.NewWatcher(tf.Registry)
		reg, err = watcher.Load()
	}
	if err != nil {
		return fail(fmt.Errorf("--registry: %w", err))
	}
	obs, err := newObserve(*httpAddr, *pprofOn, *redisFresh, reg, keys, logger)
	if err != nil {
		return fail(fmt.Errorf("--http: %w", err))
	}
	tf.JobIDHeader = *jobHeader
	tf.ProxyWatch = func(proxy, reason string, err error) { obs.metrics.ProxyTunnel(proxy, reason, err == nil) }
	sender, err := tf.Sender(reg)
	if err != nil {
		return fail(err)
	}
	defer func() { sender.Close() }() // the sender in force when run returns
	if *consumer == "" {
		*consumer = cli.ConsumerName()
	}
	// Every lane reader and intake reader (two a shard, one per class) holds a blocking
	// connection while it waits.
	if readers := readShards * (2 + len(reg.Providers())); readers > maxBlockingReaders {
		return fail(fmt.Errorf("reading %d shards (--shards, or --reshard-from when larger) with %d providers needs %d blocking Redis connections per worker; at most %d: use fewer shards",
			readShards, len(reg.Providers()), readers, maxBlockingReaders))
	}
	so.Prefix, so.Shards, so.Consumer = rf.prefix, rf.shards, *consumer
	calls := &stream.CallCounter{}
	store, err := stream.Open(rf.url, stream.OpenOptions{
		Options: so, ClientName: "gateway-worker",
		BlockingPoolSize: readShards*(2+len(reg.Providers())) + 4,
		Hooks:            []redis.Hook{calls},
	})
	if err != nil {
		return fail(fmt.Errorf("--redis: %w", err))
	}
	defer store.Close()
	if *profile != "" {
		stop, err := startCPUProfile(*profile)
		if err != nil {
			return fail(err)
		}
		defer stop()
	}
	if *statsFile != "" {
		defer func() {
			if err := writeRunStats(*statsFile, calls, sender); err != nil {
				logger.Error("stats file not written", "err", err)
			}
		}()
	}
	hashKey, err := vapid.EndpointHashKey(keys)
	if err != nil {
		return fail(fmt.Errorf("--vapid-key: %w", err))
	}
	cfg.Store, cfg.Sender, cfg.Registry, cfg.Keys, cfg.Logger = store, sender, reg, keys, logger
	cfg.Metrics, cfg.Health, cfg.Signatures, cfg.EndpointHashKey = obs.metrics, obs.health, sender.SignaturesByKey, hashKey
	cfg.Version, cfg.Upstream, cfg.Campaigns = buildinfo.Version(), stream.KeyspaceOf(store), stream.CampaignsOf(store)
	worker, err := dispatch.New(cfg)
	if err != nil {
		return fail(err)
	}
	logger.Info("worker starting", "version", buildinfo.Version(), "go", runtime.Version(), "consumer", *consumer,
		"shards", rf.shards, "reshard_from", so.ReshardFrom, "providers", len(reg.Providers()), "registry", registryName(tf.Registry),
		"proxy", proxyName(sender, reg))
	obs.metrics.RegistryReload(true, time.Now())
	stopHTTP := obs.serve(logger)
	defer stopHTTP()

	rl := &dispatch.Reloader{Watcher: watcher, Worker: worker, Build: tf.NextSender, Metrics: obs.metrics, Health: obs.health,
		Logger: logger, Sender: sender, Registry: reg}
	stopped, reloads := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reloads)
		rl.Run(ctx, stopped, hup, *registryEvery)
	}()
	err = worker.Run(ctx)
	close(stopped)
	<-reloads
	sender = rl.Sender
	if err != nil {
		logger.Error("worker stopped", "err", err)
		return 1
	}
	logger.Info("worker stopped")
	return 0
}

func writeRunStats(path string, calls *stream.CallCounter, sender *adapter.Sender) error {
	b, err := json.Marshal(cli.RunStats{
		RedisRoundTrips: calls.RoundTrips(), RedisCommands: calls.Commands(), VAPIDSignatures: sender.Signatures(),
	})
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// startCPUProfile profiles the process until the returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// proxyName says where the providers' connections go, for the start line: "direct", one
// proxy's host:port, or the providers by proxy when they differ. Never credentials.
func proxyName(sender *adapter.Sender, reg *providers.Registry) string {
	by := map[string][]string{}
	for _, id := range reg.IDs() {
		p := cmp.Or(sender.ProxyOf(id), "direct")
		by[p] = append(by[p], id)
	}
	if len(by) == 1 {
		for p := range by {
			return p
		}
	}
	names := make([]string, 0, len(by))
	for p, ids := range by {
		names = append(names, p+" ("+strings.Join(ids, ",")+")")
	}
	sort.Strings(names)
	return strings.Join(names, "; ")
}
