package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// Inspector runs the operators' queries and commands on a prefix: its status (queues, lanes,
// replicas, pauses, memory), where a job is, the dead records (list, show, replay, purge), the
// pauses of providers, the cancel of jobs, the campaigns' status, pause, resume and cancel, and
// the audit of a run. It reads, apart from the few commands an operator gives (pause, resume,
// replay, purge, cancel); it moves no job of the worker's and needs no consumer name. It is
// safe for concurrent use.
type Inspector struct {
	c     redis.UniversalClient
	o     stream.Options // with their defaults, as the Keyspace has them
	ks    *stream.Keyspace
	owned redis.UniversalClient // what Close closes: the client Open made
}

// New returns an Inspector over a client the caller owns and closes; Open makes one with a
// client of its own. o is read as a Store reads it (Prefix, Shards, ReshardFrom, SentTTL; the
// fields about records and commits are a Store's alone).
func New(c redis.UniversalClient, o stream.Options) *Inspector {
	ks := stream.NewKeyspace(c, o)
	return &Inspector{c: c, o: ks.Options(), ks: ks}
}

// Open connects an Inspector to the Redis that rawURL names (the URLs of stream.Open). It has
// one client (stream.OpenClient), of o.PoolSize connections; Close closes it.
func Open(rawURL string, o stream.OpenOptions) (*Inspector, error) {
	c, err := stream.OpenClient(rawURL, o)
	if err != nil {
		return nil, err
	}
	s := New(c, o.Options)
	s.owned = c
	return s, nil
}

// Close closes the client Open made; an Inspector made with New has none.
func (s *Inspector) Close() error {
	if s.owned == nil {
		return nil
	}
	return s.owned.Close()
}

// Shards is the number of shards the Inspector reads: Options.Shards, or Options.ReshardFrom
// when that is larger, as a Store does.
func (s *Inspector) Shards() int { return s.ks.Shards() }

// Time is Redis's clock (TIME), which the times a worker writes follow (its records' entry ids):
// a command that looks for what a worker wrote after a moment takes the moment from it, not
// from its own host's clock.
func (s *Inspector) Time(ctx context.Context) (time.Time, error) {
	t, err := s.c.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("inspect: redis time: %w", err)
	}
	return t, nil
}

// Keys are the keys of shard.
func (s *Inspector) Keys(shard int) stream.Keys { return stream.KeysFor(s.o.Prefix, shard) }
