package stream

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyspace is what a Store and a Keyspace share: the main client and the options of one key
// prefix, and the reads both make of it. Both are immutable after they are made.
type keyspace struct {
	c redis.UniversalClient
	o Options
}

// Keyspace is one key prefix on one client: the reads that a worker and the operators' queries
// (package stream/inspect) both make of the prefix's keys, and the few writes of the worker's
// scripts an operator's command runs too. It needs no consumer name and reads no entry as a
// consumer. It is safe for concurrent use.
//
// Package stream/inspect builds its Inspector on it; a worker reads its upstreams' consumer
// groups and Redis's memory through the Keyspace of its Store (KeyspaceOf).
type Keyspace struct{ keyspace }

// NewKeyspace returns the Keyspace of o's prefix over a client the caller owns and closes
// (OpenClient makes one from a Redis URL). o is read as a Store reads it (Prefix, Shards,
// ReshardFrom, SentTTL); the fields about records and commits are a Store's alone.
func NewKeyspace(c redis.UniversalClient, o Options) *Keyspace {
	return &Keyspace{keyspace{c: c, o: o.withDefaults()}}
}

// KeyspaceOf is the Keyspace of s's prefix, over s's main client: closing s ends it.
func KeyspaceOf(s *Store) *Keyspace { return &Keyspace{s.keyspace} }

// Client is the Keyspace's client.
func (s *Keyspace) Client() redis.UniversalClient { return s.c }

// Options are the Keyspace's options, with their defaults set (Prefix, Shards, SentTTL).
func (s *Keyspace) Options() Options { return s.o }

// Shards is the number of shards the Keyspace reads: Options.Shards, or Options.ReshardFrom
// when that is larger, as a Store does.
func (s *Keyspace) Shards() int { return max(s.o.Shards, s.o.ReshardFrom) }

// VerifyShards is Store.Setup's shard count check for a reader: it compares Options.Shards
// with the count recorded for the prefix (ErrShardCount when they differ) and records nothing.
func (s *Keyspace) VerifyShards(ctx context.Context) error {
	return checkShards(ctx, s.c, s.o.Prefix, s.o.Shards, false)
}

// LeftoverShards are the shards numbered from and up (to MaxShards) of which any key a job
// can be in, a terminal record, or a campaign exists: what a larger shard count left behind
// (docs/operations.md, "Changing the shard count").
func (s *Keyspace) LeftoverShards(ctx context.Context, from int) ([]int, error) {
	return s.leftoverShards(ctx, from)
}

// Lanes lists the providers with a lane on shard (of either class), found by SCAN, sorted. An
// operator's query: SCAN walks every key.
func (s *Keyspace) Lanes(ctx context.Context, shard int) ([]string, error) {
	return s.lanes(ctx, shard, nil)
}

// lanes lists the providers with a lane on shard: known (those given to Setup) and those found
// by SCAN (a lane created by another replica's configuration).
func (s *keyspace) lanes(ctx context.Context, shard int, known []string) ([]string, error) {
	set := map[string]bool{}
	for _, p := range known {
		set[p] = true
	}
	prefix := KeysFor(s.o.Prefix, shard).LanePrefix
	keys, err := s.scanKeys(ctx, globEscape(prefix)+"*")
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		// A provider's bulk lane names the provider too.
		set[strings.TrimSuffix(strings.TrimPrefix(k, prefix), bulkSuffix)] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// QueueStats is Store.QueueStats, as an operator reads it (gateway-worker status).
func (s *Keyspace) QueueStats(ctx context.Context, shard int, providers []string, now time.Time) ([]QueueStat, error) {
	return s.queueStats(ctx, shard, providers, now)
}

// WasSent is Store.WasSent in a call of its own, outside the Store's shared pipelines: whether
// job id was accepted on shard, within the sent TTL (Options.SentTTL) or while a reclaimed
// entry of it is still pending.
func (s *Keyspace) WasSent(ctx context.Context, shard int, id string) (bool, error) {
	keys, args := s.wasSentCall(shard, id)
	n, err := wasSentScript.Run(ctx, s.c, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("stream: sent mark: %w", err)
	}
	return n == 1, nil
}

// DrainCampaign is Campaigns.Drain, for an operator's cancel: it gives at most CampaignChunk
// of cancelled campaign id's waiting recipients (in its lists for providers) their CANCELED
// records and frees them; left is how many still wait, and ok is false when the campaign is not
// cancelled (nothing changed).
func (s *Keyspace) DrainCampaign(ctx context.Context, shard int, id string, providers []string, now time.Time) (drained, left int64, ok bool, err error) {
	return drainCampaign(ctx, s.c, s.o.Prefix, shard, id, providers, now)
}

// WithCampaignLib is script src with the functions the scripts that end a job share for
// campaigns (camp.lua: a campaign's count of a job's terminal record) in front of it, for a
// script of another package that ends a job as the worker's scripts do.
func WithCampaignLib(src string) string { return withLib(campLua, src) }
