package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure a Store.
type Options struct {
	// Prefix starts every key (default "wp").
	Prefix string
	// Shards is the number of shards (default 1). Producers must use the same number.
	Shards int
	// Consumer is this process's consumer name in the group: unique per process (pod name and
	// a random suffix), never reused by a restarted process.
	Consumer string
	// SentTTL is how long the sent mark of an accepted job lives (default 1h): longer than any
	// plausible redelivery of the same entry.
	SentTTL time.Duration
	// GoneTTL is how long an endpoint reported gone is remembered (default 7 days), so queued
	// retries to it are dropped without a send.
	GoneTTL time.Duration
	// ResultsMaxLen, GoneMaxLen and DeadMaxLen cap the ledger, gone and dead streams with an
	// approximate MAXLEN on every write (0, the default, means no cap). No consumer group of
	// ours reads these streams; an upstream that consumes them must keep up with the cap.
	ResultsMaxLen, GoneMaxLen, DeadMaxLen int64
	// Now is the clock for the "at" of records the Store writes on its own (dead records of
	// Reclaim); time.Now when nil.
	Now func() time.Time
}

// Store runs every Redis operation of the gateway. It is safe for concurrent use.
type Store struct {
	c        redis.UniversalClient // short commands and scripts
	blocking redis.UniversalClient // XREADGROUP BLOCK only, so blocked reads cannot starve c
	o        Options               // immutable after New
	// groups send the state changes and checks of concurrent jobs in shared pipelines, one per
	// shard: a shard's keys live on one Redis Cluster node, so a slow or failing node holds up
	// only its own shard's pipeline.
	groups []*groupCommit

	mu        sync.Mutex
	providers map[string]bool // guarded by mu; providers given to Setup
	ready     map[string]bool // guarded by mu; lane keys whose group this Store created or found
}

// New returns a Store. blocking may be the same client as c in tests; in production it is a
// separate pool so that blocking reads never hold the connections scripts need.
func New(c redis.UniversalClient, blocking redis.UniversalClient, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Shards < 1 {
		o.Shards = 1
	}
	if o.SentTTL <= 0 {
		o.SentTTL = time.Hour
	}
	if o.GoneTTL <= 0 {
		o.GoneTTL = 7 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if blocking == nil {
		blocking = c
	}
	groups := make([]*groupCommit, o.Shards)
	for i := range groups {
		groups[i] = &groupCommit{c: c}
	}
	return &Store{c: c, blocking: blocking, o: o, groups: groups, providers: map[string]bool{}, ready: map[string]bool{}}
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

// Shards is the number of shards.
func (s *Store) Shards() int { return s.o.Shards }

// Consumer is this store's consumer name.
func (s *Store) Consumer() string { return s.o.Consumer }

// Keys are the keys of shard.
func (s *Store) Keys(shard int) Keys { return KeysFor(s.o.Prefix, shard) }

// IntakeStream is the intake stream key of shard.
func (s *Store) IntakeStream(shard int) string { return s.Keys(shard).Intake }

// LaneStream is the lane stream key of provider on shard.
func (s *Store) LaneStream(shard int, provider string) string { return s.Keys(shard).Lane(provider) }

// Setup creates the consumer group on the intake stream and on the lane of every provider on
// every shard (an existing group is left as it is) and loads the scripts.
//
// A new group starts at id 0, not "$": jobs an upstream enqueued before the first worker ever
// ran are delivered, not skipped. Acknowledged entries are deleted, so an existing stream
// holds no history that 0 would replay.
func (s *Store) Setup(ctx context.Context, providers []string) error {
	s.mu.Lock()
	for _, p := range providers {
		s.providers[p] = true
	}
	s.mu.Unlock()
	for shard := 0; shard < s.o.Shards; shard++ {
		k := s.Keys(shard)
		streams := []string{k.Intake}
		for _, p := range providers {
			streams = append(streams, k.Lane(p))
		}
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

// ReadIntake reads up to count new intake entries of shard for this consumer, blocking up to
// block (block <= 0 does not block). No entry is (nil, nil).
func (s *Store) ReadIntake(ctx context.Context, shard, count int, block time.Duration) ([]Entry, error) {
	return s.read(ctx, shard, s.IntakeStream(shard), count, block)
}

// ReadLane reads up to count new entries of provider's lane on shard, as ReadIntake.
func (s *Store) ReadLane(ctx context.Context, shard int, provider string, count int, block time.Duration) ([]Entry, error) {
	return s.read(ctx, shard, s.LaneStream(shard, provider), count, block)
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
