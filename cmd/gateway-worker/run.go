package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// redisFlags are the flags every command that talks to Redis shares.
type redisFlags struct {
	url    string
	prefix string
	shards int
}

func (r *redisFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.url, "redis", "", "Redis `URL`: redis://, rediss://, redis+sentinel://h:p,h:p/master, redis+cluster://h:p,h:p")
	fs.StringVar(&r.prefix, "prefix", stream.DefaultPrefix, "key `PREFIX` of every key")
	fs.IntVar(&r.shards, "shards", 1, "number of shards; producers and workers must agree")
}

func (r *redisFlags) check() error {
	if r.url == "" {
		return fmt.Errorf("--redis is required")
	}
	if r.shards < 1 || r.shards > stream.MaxShards {
		return fmt.Errorf("--shards must be 1 to %d, got %d", stream.MaxShards, r.shards)
	}
	return nil
}

// loadVAPIDKeys loads --vapid-key [NAME=]FILE values (FILE may be the key itself); a bare
// FILE is the key named "default".
func loadVAPIDKeys(specs []string) (map[string]*vapid.Key, error) {
	keys := make(map[string]*vapid.Key, len(specs))
	for _, spec := range specs {
		name, file, ok := strings.Cut(spec, "=")
		if !ok || !keyName(name) || file == "" || file[0] == '=' {
			// No NAME= in front: the whole value is the file or the key, whose base64 may end
			// in '=' and whose PEM has spaces. Errors print the name, so it must not be a key.
			name, file = "default", spec
		}
		if _, dup := keys[name]; dup {
			return nil, fmt.Errorf("--vapid-key: two keys named %q", name)
		}
		k, err := vapid.LoadKeyFile(name, file)
		if err != nil {
			return nil, err
		}
		keys[name] = k
	}
	return keys, nil
}

// maxKeyName bounds the NAME of --vapid-key NAME=FILE. A raw key is 43 characters or more, so
// one written KEY=... (or KEY= with base64 padding) is never taken for a name, which errors
// print.
const maxKeyName = 32

// keyName reports whether s may be the NAME of --vapid-key NAME=FILE: up to maxKeyName of the
// printable ASCII a job's vapid_key may hold, spaces left out.
func keyName(s string) bool {
	if s == "" || len(s) > maxKeyName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// maxBlockingReaders bounds the readers of one worker (shards x (1 + providers)), each of which
// holds a Redis connection while it blocks: more would exhaust Redis's connections with a few
// replicas.
const maxBlockingReaders = 4096

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker run", stderr)
	var (
		rf        redisFlags
		tf        cli.Transport
		keySpecs  cli.ListFlag
		consumer  = fs.String("consumer", "", "consumer `NAME` in the group (default: $POD_NAME or the host name, plus a random suffix)")
		jobHeader = fs.String("job-id-header", "", "send each job's id in this request `HEADER` (for simulators; off in production)")
		logLevel  = fs.String("log-level", "info", "debug, info, warn or error")
		statsFile = fs.String("stats-file", "", "when the worker stops, write what it did as JSON to `FILE`: Redis round trips and commands it sent, VAPID signatures it made")
		profile   = fs.String("cpu-profile", "", "write a CPU profile (go tool pprof) of the whole run to `FILE`")
		gcPercent = fs.Int("gogc", cli.DefaultGOGC, "garbage collection target `PERCENT`, as Go's GOGC (which wins when set); see docs/operations.md")
		cfg       dispatch.Config
	)
	rf.register(fs)
	tf.Register(fs)
	fs.Var(&keySpecs, "vapid-key", "VAPID private key as [NAME=]`FILE` (PEM, or the raw base64url key; FILE may also be the key itself; NAME is at most 32 characters); repeat for every key name jobs may give in vapid_key")
	fs.DurationVar(&cfg.Grace, "grace", 25*time.Second, "how long in-flight sends may finish after SIGTERM")
	fs.DurationVar(&cfg.RecordGrace, "record-grace", 10*time.Second, "how much longer than --grace the outcomes of answered sends may wait for Redis before shutdown gives them up (each logged)")
	fs.DurationVar(&cfg.VisibilityTimeout, "visibility-timeout", 60*time.Second, "idle time after which another worker reclaims an entry")
	fs.Int64Var(&cfg.MaxDeliveries, "max-deliveries", 5, "deliveries of one entry before it goes to dead")
	fs.DurationVar(&cfg.Backoff.Base, "retry-base", 5*time.Second, "first retry delay, doubling each attempt")
	fs.DurationVar(&cfg.Backoff.Cap, "retry-cap", 10*time.Minute, "longest retry delay")
	fs.IntVar(&cfg.Backoff.MaxRetries, "max-retries", 8, "retries after the first attempt (0: none)")
	fs.Int64Var(&cfg.MaxDelayed, "max-delayed", 1_000_000, "jobs a shard's delayed set holds before retries go to dead (0: no cap)")
	fs.Int64Var(&cfg.MaxPerRecipient, "max-per-recipient", 1_000, "one recipient's jobs in the delayed set before its retries go to dead (0: no cap)")
	var so stream.Options
	fs.DurationVar(&so.SentTTL, "sent-ttl", time.Hour, "how long an accepted job's id is remembered: a redelivered or re-enqueued copy within it is not sent again")
	fs.DurationVar(&so.GoneTTL, "gone-ttl", 7*24*time.Hour, "how long an endpoint reported gone is remembered, so its queued retries are dropped")
	fs.Int64Var(&so.ResultsMaxLen, "results-maxlen", stream.DefaultResultsMaxLen, "keep the ledger stream at about this many records, never trimming what an upstream's consumer group has not read and acknowledged (0: no bound; the upstream trims it)")
	fs.Int64Var(&so.GoneMaxLen, "gone-maxlen", stream.DefaultGoneMaxLen, "keep the gone stream at about this many records, as --results-maxlen (0: no bound)")
	fs.Int64Var(&so.DeadMaxLen, "dead-maxlen", stream.DefaultDeadMaxLen, "keep the dead stream at about this many records, as --results-maxlen (0: no bound)")
	fs.DurationVar(&cfg.Block, "block", time.Second, "longest blocking read (bounds how long shutdown waits for a reader)")
	fs.DurationVar(&cfg.ReclaimEvery, "reclaim-every", 5*time.Second, "how often entries of dead workers are reclaimed")
	fs.DurationVar(&cfg.PromoteEvery, "promote-every", 250*time.Millisecond, "how often due retries return to their lanes")
	fs.DurationVar(&cfg.StartupTimeout, "startup-timeout", 2*time.Minute, "give up (exit 1) when Redis cannot be set up within this time; refused credentials exit at once")
	fs.DurationVar(&cfg.CommitLinger, "commit-linger", dispatch.DefaultCommitLinger, "how long a shard's shared pipeline of records waits for others to join it before it goes to Redis (0: not at all); no send waits for it")
	fs.DurationVar(&cfg.LaneGather, "lane-gather", dispatch.DefaultLaneGather, "longest a lane waits to read while the entries it started still wait for their provider's tokens (0: read as soon as a slot is free)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	if err := cli.NoArgs(fs); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gateway-worker run:", err)
		return 2
	}
	if err := rf.check(); err != nil {
		return fail(err)
	}
	// The worker's live heap is small (jobs in flight, a few MB) and it allocates quickly, so
	// Go's default target of 100% collects many times a second; 400% trades a few more MB for
	// most of that CPU (BENCHMARKS.md, docs/operations.md).
	if os.Getenv("GOGC") == "" {
		if *gcPercent < 10 {
			return fail(fmt.Errorf("--gogc must be at least 10"))
		}
		debug.SetGCPercent(*gcPercent)
	}
	// On the command line 0 means "none"; in dispatch.Config 0 means "the default" and a
	// negative number means none.
	for _, v := range []*int64{&cfg.MaxDelayed, &cfg.MaxPerRecipient, &so.ResultsMaxLen, &so.GoneMaxLen, &so.DeadMaxLen} {
		if *v == 0 {
			*v = -1
		}
	}
	if cfg.Backoff.MaxRetries == 0 {
		cfg.Backoff.MaxRetries = -1
	}
	for _, v := range []*time.Duration{&cfg.CommitLinger, &cfg.LaneGather} {
		if *v == 0 {
			*v = dispatch.NoLinger
		}
	}
	if len(keySpecs) == 0 || tf.Subject == "" {
		return fail(fmt.Errorf("--vapid-key and --subject are required"))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fail(fmt.Errorf("--log-level: %w", err))
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	keys, err := loadVAPIDKeys(keySpecs)
	if err != nil {
		return fail(err)
	}
	reg, err := cli.LoadRegistry(tf.Registry)
	if err != nil {
		return fail(err)
	}
	tf.JobIDHeader = *jobHeader
	sender, err := tf.Sender(reg)
	if err != nil {
		return fail(err)
	}
	defer sender.Close()
	if *consumer == "" {
		*consumer = cli.ConsumerName()
	}
	// Every lane reader and intake reader holds a blocking connection while it waits.
	if readers := rf.shards * (1 + len(reg.Providers())); readers > maxBlockingReaders {
		return fail(fmt.Errorf("--shards %d with %d providers needs %d blocking Redis connections per worker; at most %d: use fewer shards",
			rf.shards, len(reg.Providers()), readers, maxBlockingReaders))
	}
	so.Prefix, so.Shards, so.Consumer = rf.prefix, rf.shards, *consumer
	store, err := stream.Open(rf.url, stream.OpenOptions{
		Options: so, ClientName: "gateway-worker",
		BlockingPoolSize: rf.shards*(1+len(reg.Providers())) + 4,
	})
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	calls := &stream.CallCounter{}
	store.AddHook(calls)
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
	cfg.Store, cfg.Sender, cfg.Registry, cfg.Keys, cfg.Logger = store, sender, reg, keys, logger
	logger.Info("worker starting", "version", buildinfo.Version(), "consumer", *consumer, "shards", rf.shards, "providers", len(reg.Providers()))
	if err := dispatch.Run(ctx, cfg); err != nil {
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
