package stream

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

var (
	//go:embed read_intake.lua
	readIntakeLua    string
	readIntakeScript = redis.NewScript(takeLua + entryCheckLib() + readIntakeLua)
)

// DefaultSentTTL and DefaultGoneTTL are the defaults of Options' zero TTLs;
// DefaultCommitLinger is the worker's --commit-linger.
const (
	DefaultSentTTL      = time.Hour
	DefaultGoneTTL      = 7 * 24 * time.Hour
	DefaultCommitLinger = 2 * time.Millisecond
)

// Options configure a Store. As in every configuration of this project, 0 switches off what may
// be off (the record streams' bounds, the commit linger) and takes the default for what may not
// (the prefix, the shard count, the TTLs); a negative number is taken as 0.
type Options struct {
	// Prefix starts every key (default "wp").
	Prefix string
	// Shards is the number of shards (default 1). Producers must use the same number.
	Shards int
	// ReshardFrom is the shard count the prefix had before Shards, while the count changes on
	// a live system (docs/operations.md, "Changing the shard count"); 0 when no change is under
	// way. The Store then reads the shards of both counts (Shards reports the larger), so jobs
	// in the old count's shards are still delivered, and Setup takes the old count as
	// recorded and records Shards in its place. Producers made by the Store write with Shards.
	ReshardFrom int
	// Consumer is this process's consumer name in the group: unique per process (pod name and
	// a random suffix), never reused by a restarted process.
	Consumer string
	// SentTTL is how long the window remembers an accepted job (DefaultSentTTL): longer than
	// any plausible redelivery of the same entry.
	SentTTL time.Duration
	// GoneTTL is how long an endpoint reported gone is remembered (DefaultGoneTTL), so queued
	// retries to it are dropped without a send.
	GoneTTL time.Duration
	// ResultsMaxLen, GoneMaxLen and DeadMaxLen bound the ledger, gone and dead streams at about
	// this many records (the worker's are DefaultResultsMaxLen, DefaultGoneMaxLen and
	// DefaultDeadMaxLen; 0: unbounded). No consumer group of ours reads these streams. TrimRecords applies the bounds,
	// never past an entry that a consumer group of an upstream has not read and acknowledged;
	// no write trims them on its own.
	ResultsMaxLen, GoneMaxLen, DeadMaxLen int64
	// CommitLinger is how long each shard's shared pipeline of records that may wait (Finish of
	// a Result with Linger set) waits after its first one for others to join it (the worker's
	// is DefaultCommitLinger; 0: not at all; see groupCommit). At a steady rate below what
	// the worker can do, each record would otherwise pay a round trip and a script call of its
	// own; with the linger the records of a few milliseconds share them. Moves to a lane, the
	// checks before a send and every other record never wait (BENCHMARKS.md has its effect).
	CommitLinger time.Duration
	// Now is the clock for the "at" of records the Store writes on its own (dead records of
	// Reclaim); time.Now when nil. The duplicate-suppression window never reads it: it ages its
	// jobs by Redis's clock, the one clock every replica shares.
	Now func() time.Time
}

// Store runs the worker's Redis operations: its reads, the state changes of its jobs, its
// heartbeat and upkeep. The operators' queries are stream/inspect's. It is safe for concurrent
// use.
type Store struct {
	keyspace                         // the main client (short commands and scripts) and Options, immutable after New
	blocking redis.UniversalClient   // XREADGROUP BLOCK only, so blocked reads cannot starve c
	bell     redis.UniversalClient   // the intake's wait for new entries (see waitIntake)
	owned    []redis.UniversalClient // what Close closes: the clients Open made
	bounds   recordBounds            // immutable after New; TrimRecords applies them
	// groups send the state changes and checks of concurrent jobs in shared pipelines, one per
	// shard: a shard's keys live on one Redis Cluster node, so a slow or failing node holds up
	// only its own shard's pipeline.
	groups []*groupCommit

	mu        sync.Mutex
	providers map[string]bool // guarded by mu; providers given to Setup
	ready     map[string]bool // guarded by mu; lane keys whose group this Store created or found
}

// New returns a Store over clients the caller owns and closes; Open makes a Store with
// clients of its own. Tests use New to share a client, or to give one options of their own.
// blocking may be c itself (nil means c); in production it is a separate pool so that
// blocking reads never hold the connections scripts need. The intake waits on blocking too,
// whose replies are not capped as those of the client Open makes for the wait are
// (waitIntake).
func New(c redis.UniversalClient, blocking redis.UniversalClient, o Options) *Store {
	o = o.withDefaults()
	if blocking == nil {
		blocking = c
	}
	bounds := recordBounds{max(o.ResultsMaxLen, 0), max(o.GoneMaxLen, 0), max(o.DeadMaxLen, 0)}
	// The scripts' own MAXLEN on each write would trim whatever an upstream's group has not
	// read: it stays off, and TrimRecords bounds the streams instead.
	o.ResultsMaxLen, o.GoneMaxLen, o.DeadMaxLen = 0, 0, 0
	groups := make([]*groupCommit, max(o.Shards, o.ReshardFrom))
	for i := range groups {
		groups[i] = newGroupCommit(c, max(o.CommitLinger, 0))
	}
	return &Store{keyspace: keyspace{c: c, o: o}, blocking: blocking, bell: blocking, bounds: bounds, groups: groups,
		providers: map[string]bool{}, ready: map[string]bool{}}
}

// withDefaults is o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Shards < 1 {
		o.Shards = 1
	}
	if o.ReshardFrom < 0 || o.ReshardFrom == o.Shards {
		o.ReshardFrom = 0
	}
	if o.SentTTL <= 0 {
		o.SentTTL = DefaultSentTTL
	}
	if o.GoneTTL <= 0 {
		o.GoneTTL = DefaultGoneTTL
	}
	o.CommitLinger = max(o.CommitLinger, 0)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Close closes the clients Open made; a Store made with New has none, its clients are the
// caller's to close.
func (s *Store) Close() error {
	var errs []error
	for _, c := range s.owned {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Producer is a Producer on the Store's main client, with its prefix and shard count.
func (s *Store) Producer(opts ...ProducerOption) *Producer {
	return NewProducer(s.c, s.o.Prefix, s.o.Shards, opts...)
}

// groupFor is the group commit of the shard key belongs to, read from the first ":{shard}" in
// it: the one KeysFor puts after the prefix (a job id later in the key may hold braces). A key
// it cannot read goes to shard 0's, which only groups it with other commands.
func (s *Store) groupFor(key string) *groupCommit {
	if i := strings.Index(key, ":{"); i >= 0 {
		rest := key[i+2:]
		if j := strings.IndexByte(rest, '}'); j > 0 {
			if n, err := strconv.Atoi(rest[:j]); err == nil && n >= 0 && n < len(s.groups) {
				return s.groups[n]
			}
		}
	}
	return s.groups[0]
}

// Shards is the number of shards the Store reads: Options.Shards, or Options.ReshardFrom when
// that is larger. Every loop of a worker runs over these.
func (s *Store) Shards() int { return max(s.o.Shards, s.o.ReshardFrom) }

// Consumer is this store's consumer name.
func (s *Store) Consumer() string { return s.o.Consumer }

// Keys are the keys of shard.
func (s *Store) Keys(shard int) Keys { return KeysFor(s.o.Prefix, shard) }

// Setup creates the consumer group on both intakes and on both lanes (transactional and bulk)
// of every provider on every shard (an existing group is left as it is) and loads the scripts.
//
// A new group starts at id 0, not "$": jobs an upstream enqueued before the first worker ever
// ran are delivered, not skipped. Acknowledged entries are deleted, so an existing stream
// holds no history that 0 would replay.
func (s *Store) Setup(ctx context.Context, providers []string) error {
	if err := s.checkVersion(ctx); err != nil {
		return err
	}
	if err := s.checkShardCount(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	for _, p := range providers {
		s.providers[p] = true
	}
	s.mu.Unlock()
	if err := s.checkLeftovers(ctx); err != nil {
		return err
	}
	for shard := 0; shard < s.o.Shards; shard++ {
		k := s.Keys(shard)
		streams := append(k.Intakes(), laneKeys(k, providers)...)
		for _, st := range streams {
			if err := s.createGroup(ctx, st); err != nil {
				return err
			}
			s.mu.Lock()
			s.ready[st] = true
			s.mu.Unlock()
		}
	}
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("stream: load scripts: %w", err)
		}
	}
	return nil
}

// Errors of a Redis this process must not run against; no retry cures them.
var (
	ErrRedisVersion = errors.New("stream: redis too old")
	ErrShardCount   = errors.New("stream: shard count mismatch")
	ErrBadPrefix    = errors.New("stream: bad key prefix")
)

// MinRedisVersion is the oldest Redis the gateway runs on: its scripts declare flags
// (allow-oom), which Redis 7.0 introduced, and read TIME before they write (the window's
// clock), which Redis 7.0 allows since it replicates every script by its effects.
const MinRedisVersion = "7.0"

// checkVersion refuses a Redis older than MinRedisVersion with an error that says so, rather
// than the Lua syntax error an old server would give for the scripts' flags.
func (s *Store) checkVersion(ctx context.Context) error {
	info, err := s.c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("stream: redis version: %w", err)
	}
	v := infoField(info, "redis_version")
	major, _, _ := strings.Cut(v, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 7 {
		return fmt.Errorf("%w: Redis %s or newer is required; this server is %q", ErrRedisVersion, MinRedisVersion, v)
	}
	return nil
}

// infoField is the value of field in an INFO reply, "" when absent.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// checkShardCount, which Setup runs, makes sure that every worker, producer and audit of a
// prefix uses one shard count. The first to use the prefix records its count (ShardsKey); one
// that has another count gets an error that names both, because jobs written to a shard no
// worker reads wait there unseen. With Options.ReshardFrom, the old count is accepted as
// recorded and replaced by Shards (switchShards). To change the count, see docs/operations.md.
func (s *Store) checkShardCount(ctx context.Context) error {
	if s.o.ReshardFrom > 0 {
		return switchShards(ctx, s.c, s.o.Prefix, s.o.ReshardFrom, s.o.Shards)
	}
	return checkShards(ctx, s.c, s.o.Prefix, s.o.Shards, true)
}

// checkShards compares shards with the count recorded for prefix, recording it first when
// record is set and none is (a reader, such as audit, records nothing).
func checkShards(ctx context.Context, c redis.UniversalClient, prefix string, shards int, record bool) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	key := ShardsKey(prefix)
	if record {
		if err := c.SetNX(ctx, key, shards, 0).Err(); err != nil {
			return fmt.Errorf("stream: record the shard count: %w", err)
		}
	}
	got, err := c.Get(ctx, key).Int()
	if !record && errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream: read the shard count from %s: %w", key, err)
	}
	if got != shards {
		return fmt.Errorf("%w: prefix %q is used with %d shards (recorded in %s) but this process was given %d; use --shards %d, or see docs/operations.md to change the shard count",
			ErrShardCount, prefix, got, key, shards, got)
	}
	return nil
}

// CheckPrefix refuses a key prefix with a brace in it: Redis Cluster hashes the first "{...}"
// of a key, so a brace in the prefix would move every shard's keys to one slot of the prefix's
// choosing, and a script's keys could span slots. "" is DefaultPrefix.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: %q has a brace; Redis Cluster would hash it instead of the shard", ErrBadPrefix, prefix)
	}
	return nil
}

// ProbeWrite tells whether shard's Redis accepts writes now: a SET ... XX of a key that never
// exists, which Redis refuses while it refuses writes (out of memory, a failed save, a
// read-only replica) and which otherwise writes nothing. The error, if any, is what Redis
// said; WriteRefused tells a refusal from a lost connection.
func (s *Store) ProbeWrite(ctx context.Context, shard int) error {
	err := s.c.SetXX(ctx, s.Keys(shard).Probe, "1", 0).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("stream: write probe: %w", err)
	}
	return nil
}

func (s *Store) createGroup(ctx context.Context, stream string) error {
	err := s.c.XGroupCreateMkStream(ctx, stream, Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("stream: create group on %s: %w", stream, err)
	}
	return nil
}

// ensureLane creates the group of a lane this Store has not seen yet (a provider added to the
// registry after Setup), once, so that entries moved there are never stranded in a stream no
// group reads. Checking in Go keeps the check out of every ToLane script call.
func (s *Store) ensureLane(ctx context.Context, lane string) error {
	s.mu.Lock()
	ok := s.ready[lane]
	s.mu.Unlock()
	if ok {
		return nil
	}
	if err := s.createGroup(ctx, lane); err != nil {
		return err
	}
	s.mu.Lock()
	s.ready[lane] = true
	s.mu.Unlock()
	return nil
}

func (s *Store) knownProviders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.providers))
	for p := range s.providers {
		out = append(out, p)
	}
	return out
}

// Entry is one stream entry read by this consumer.
type Entry struct {
	Stream string
	ID     string
	Fields map[string]string
	Shard  int
}

// Refusal is an intake entry that ReadIntake dead-lettered where it lay, for the caller's log.
type Refusal struct {
	ID     string // the job id read from the entry's first bytes, "" when none
	Reason string
}

// ReadIntake reads up to count new entries of shard's intake of class for this consumer, in one script
// that dead-letters, in Redis, every entry that breaks the entry rules (no "job" field, more
// than one, another field, a job over job.MaxEntryBytes): such entries never reach the
// worker, and refused lists them. When the stream has nothing new it waits up to block
// (block <= 0 does not wait) for an entry to arrive and reads once more.
//
// The wait is a plain XREAD of one entry after the last one delivered to the group, on
// connections that refuse a reply larger than one entry may be (waitIntake): an oversized
// entry that arrives while the intake is idle ends that read part way, and is dead-lettered
// in Redis like the others.
func (s *Store) ReadIntake(ctx context.Context, shard int, class job.Class, count int, block time.Duration) (entries []Entry, refused []Refusal, err error) {
	if count <= 0 {
		return nil, nil, nil
	}
	if s.o.Consumer == "" {
		return nil, nil, errors.New("stream: Options.Consumer is empty; a reading Store needs a consumer name")
	}
	stream := s.Keys(shard).IntakeOf(class)
	entries, refused, last, err := s.readIntake(ctx, shard, stream, count)
	if err != nil || len(entries)+len(refused) > 0 || last == "" || block <= 0 {
		return entries, refused, err
	}
	arrived, err := s.waitIntake(ctx, stream, last, block)
	if err != nil {
		return nil, nil, fmt.Errorf("stream: wait on %s: %w", stream, err)
	}
	if !arrived {
		return nil, nil, nil // nothing came within block
	}
	entries, refused, _, err = s.readIntake(ctx, shard, stream, count)
	return entries, refused, err
}

// readIntake runs read_intake.lua on stream, an intake of shard; last is the group's last
// delivered id when the stream is drained, "" when a full batch was read.
func (s *Store) readIntake(ctx context.Context, shard int, stream string, count int) (entries []Entry, refused []Refusal, last string, err error) {
	k := s.Keys(shard)
	run := func() ([]any, error) {
		return readIntakeScript.Run(ctx, s.c, []string{stream, k.Dead},
			Group, s.o.Consumer, count, job.MaxEntryBytes, ms(s.o.Now()), s.o.DeadMaxLen).Slice()
	}
	v, err := run()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		// The stream or its group is gone (a flushed or replaced Redis): recreate it rather
		// than fail forever. Nothing is lost that was not already lost.
		if err := s.createGroup(ctx, stream); err != nil {
			return nil, nil, "", err
		}
		v, err = run()
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("stream: read %s: %w", stream, err)
	}
	if len(v) < 3 {
		return nil, nil, "", fmt.Errorf("stream: read %s: short reply", stream)
	}
	last, _ = v[1].(string)
	i := 2
	for ; i+1 < len(v); i += 2 {
		id, _ := v[i].(string)
		if id == "" {
			break
		}
		raw, _ := v[i+1].(string)
		entries = append(entries, Entry{Stream: stream, ID: id, Fields: map[string]string{"job": raw}, Shard: shard})
	}
	for i++; i+1 < len(v); i += 2 {
		id, _ := v[i].(string)
		reason, _ := v[i+1].(string)
		refused = append(refused, Refusal{ID: id, Reason: reason})
	}
	return entries, refused, last, nil
}

// readLane reads up to count new entries of provider's lane of class on shard, blocking up to
// block (block <= 0 does not block): a lane's reads are ReadLanes'; tests and benchmarks take
// one lane's entries with this.
func (s *Store) readLane(ctx context.Context, shard int, provider string, class job.Class, count int, block time.Duration) ([]Entry, error) {
	return s.read(ctx, shard, s.Keys(shard).LaneOf(provider, class), count, block)
}

func (s *Store) read(ctx context.Context, shard int, stream string, count int, block time.Duration) ([]Entry, error) {
	if count <= 0 {
		return nil, nil
	}
	if s.o.Consumer == "" {
		return nil, errors.New("stream: Options.Consumer is empty; a reading Store needs a consumer name")
	}
	args := &redis.XReadGroupArgs{
		Group:    Group,
		Consumer: s.o.Consumer,
		Streams:  []string{stream, ">"},
		Count:    int64(count),
		Block:    -1, // go-redis: a negative Block sends no BLOCK; 0 would block forever
	}
	if block > 0 {
		args.Block = block
	}
	res, err := s.blocking.XReadGroup(ctx, args).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		// The stream or its group is gone (a flushed or replaced Redis): recreate it rather
		// than fail forever. Nothing is lost that was not already lost.
		if err := s.createGroup(ctx, stream); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.ready[stream] = true
		s.mu.Unlock()
		res, err = s.blocking.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: read %s: %w", stream, err)
	}
	var out []Entry
	for _, st := range res {
		for _, m := range st.Messages {
			out = append(out, Entry{Stream: st.Stream, ID: m.ID, Fields: stringFields(m.Values), Shard: shard})
		}
	}
	return out, nil
}

func stringFields(v map[string]any) map[string]string {
	out := make(map[string]string, len(v))
	for k, x := range v {
		switch x := x.(type) {
		case string:
			out[k] = x
		default:
			out[k] = fmt.Sprint(x)
		}
	}
	return out
}

// ms is t in unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// durMs is d in whole milliseconds, at least 1 for a positive d (PX 0 is an error).
func durMs(d time.Duration) int64 {
	n := d.Milliseconds()
	if n < 1 && d > 0 {
		n = 1
	}
	return n
}
