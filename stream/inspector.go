package stream

import (
	"github.com/redis/go-redis/v9"
)

// keyspace is what a Store and an Inspector share: the main client and the options of one key
// prefix, and the reads both make of it. Both are immutable after they are made.
type keyspace struct {
	c redis.UniversalClient
	o Options
}

// Inspector runs the operators' queries and commands on a prefix: its status (queues, lanes,
// replicas, pauses, memory), where a job is, the dead records (list, show, replay, purge), the
// pauses of providers, and the audit of a run. It reads, apart from the few commands an
// operator gives (pause, resume, replay, purge); it moves no job of the worker's and needs no
// consumer name. It is safe for concurrent use.
type Inspector struct {
	keyspace
	owned redis.UniversalClient // what Close closes: the client OpenInspector made
}

// NewInspector returns an Inspector over a client the caller owns and closes; OpenInspector
// makes one with a client of its own. o is read as a Store reads it (Prefix, Shards,
// ReshardFrom; the fields about records and windows are a Store's alone).
func NewInspector(c redis.UniversalClient, o Options) *Inspector {
	return &Inspector{keyspace: keyspace{c: c, o: o.withDefaults()}}
}

// OpenInspector connects an Inspector to the Redis that rawURL names (the URLs of Open). It
// has one client, of o.PoolSize connections; Close closes it.
func OpenInspector(rawURL string, o OpenOptions) (*Inspector, error) {
	c, err := OpenClient(rawURL, o)
	if err != nil {
		return nil, err
	}
	s := NewInspector(c, o.Options)
	s.owned = c
	return s, nil
}

// OpenClient is a client of the Redis that rawURL names (the URLs of Open), of o.PoolSize
// connections, with o's TLS, name, timeouts and hooks: for a tool that reads Redis beyond the
// gateway's keys (the lab's INFO figures). The caller closes it.
func OpenClient(rawURL string, o OpenOptions) (redis.UniversalClient, error) {
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	t.apply(o)
	c := t.client(o.PoolSize)
	addHooks(c, o.Hooks)
	return c, nil
}

// Close closes the client OpenInspector made; an Inspector made with NewInspector has none.
func (s *Inspector) Close() error {
	if s.owned == nil {
		return nil
	}
	return s.owned.Close()
}

// Shards is the number of shards the Inspector reads: Options.Shards, or Options.ReshardFrom
// when that is larger, as a Store does.
func (s *Inspector) Shards() int { return max(s.o.Shards, s.o.ReshardFrom) }

// Keys are the keys of shard.
func (s *Inspector) Keys(shard int) Keys { return KeysFor(s.o.Prefix, shard) }
