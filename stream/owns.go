package stream

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// Owns reports whether e is still pending for this consumer: read (or claimed) by it and not
// yet acknowledged. It is one XPENDING of a single id. Every state change checks ownership in
// its own script; Owns is for the one step no script guards, the send: an entry the reclaimer
// handed over may have been finished meanwhile by the goroutine that held it.
func (s *Store) Owns(ctx context.Context, e Entry) (bool, error) {
	p, err := s.c.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: e.Stream, Group: Group, Start: e.ID, End: e.ID, Count: 1,
	}).Result()
	if isNoGroup(err) {
		return false, nil // no stream or no group: nothing is pending there
	}
	if err != nil {
		return false, fmt.Errorf("stream: owner of %s %s: %w", e.Stream, e.ID, err)
	}
	return len(p) == 1 && p[0].ID == e.ID && p[0].Consumer == s.o.Consumer, nil
}

// LaneSize is what one provider's lanes (both classes) on a shard hold, as Lanes measured it.
type LaneSize struct {
	Provider string
	// Length is how many entries the lanes hold, Pending how many of them are pending (read by
	// a consumer and not finished).
	Length, Pending int64
	// Err says why the lanes could not be measured; Length and Pending are then 0. The others
	// are measured all the same.
	Err error
}

// Lanes lists the providers with a lane on shard, other than those in skip, each with what its
// lanes hold: those given to Setup and those whose lane stream exists (found by SCAN: a
// provider another replica's registry has, or one since removed from the registry, whose lane
// nobody reads any more). Sorted. An operator's check, run once at start: SCAN walks the whole
// keyspace. The error is the SCAN's; a lane that could not be measured has its own Err.
func (s *Store) Lanes(ctx context.Context, shard int, skip ...string) ([]LaneSize, error) {
	providers, err := s.lanes(ctx, shard, s.knownProviders())
	if err != nil {
		return nil, err
	}
	out := make([]LaneSize, 0, len(providers))
	for _, p := range providers {
		if slices.Contains(skip, p) {
			continue
		}
		n, pending, err := s.providerLaneLength(ctx, shard, p)
		out = append(out, LaneSize{Provider: p, Length: n, Pending: pending, Err: err})
	}
	return out, nil
}

// providerLaneLength is how many entries provider's lanes (both classes) on shard hold, and how
// many of them are pending. A lane that does not exist holds none.
func (s *Store) providerLaneLength(ctx context.Context, shard int, provider string) (length, pending int64, err error) {
	for _, c := range job.Classes {
		n, p, err := s.laneLength(ctx, s.Keys(shard).LaneOf(provider, c))
		if err != nil {
			return 0, 0, err
		}
		length, pending = length+n, pending+p
	}
	return length, pending, nil
}

func (s *Store) laneLength(ctx context.Context, lane string) (length, pending int64, err error) {
	pipe := s.c.Pipeline()
	n := pipe.XLen(ctx, lane)
	p := pipe.XPending(ctx, lane, Group)
	if _, err := pipe.Exec(ctx); err != nil && !isNoGroup(err) {
		return 0, 0, fmt.Errorf("stream: length of %s: %w", lane, err)
	}
	if n.Err() != nil {
		return 0, 0, fmt.Errorf("stream: length of %s: %w", lane, n.Err())
	}
	if p.Err() == nil {
		pending = p.Val().Count
	} else if !isNoGroup(p.Err()) {
		return 0, 0, fmt.Errorf("stream: pending of %s: %w", lane, p.Err())
	}
	return n.Val(), pending, nil
}
