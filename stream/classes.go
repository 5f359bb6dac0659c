package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// bulkSuffix ends the key of a provider's bulk lane, and its name in statistics ("lane:fcm:bulk").
// Provider ids hold no colon, so no provider's lane key can end with it.
const bulkSuffix = ":bulk"

// BulkLane is the stream of provider's bulk jobs: the provider's lane of class job.ClassBulk.
// It has the lane's consumer group and entry fields, and is read only with what the
// transactional lane leaves (dispatch). Any source of bulk jobs writes to it.
func (k Keys) BulkLane(provider string) string { return k.Lane(provider) + bulkSuffix }

// LaneOf is the lane of provider for class: Lane for transactional jobs (and any class this
// release does not know), BulkLane for bulk ones.
func (k Keys) LaneOf(provider string, class job.Class) string {
	if class.IsBulk() {
		return k.BulkLane(provider)
	}
	return k.Lane(provider)
}

// LaneName is how statistics, status and the audit name provider's lane of class:
// "lane:<provider>" for transactional, "lane:<provider>:bulk" for bulk.
func LaneName(provider string, class job.Class) string {
	if class.IsBulk() {
		return "lane:" + provider + bulkSuffix
	}
	return "lane:" + provider
}

// ParseLaneName is the provider and class of a name LaneName gave; ok is false for any other
// name.
func ParseLaneName(name string) (provider string, class job.Class, ok bool) {
	rest, ok := strings.CutPrefix(name, "lane:")
	if !ok || rest == "" {
		return "", "", false
	}
	if p, bulk := strings.CutSuffix(rest, bulkSuffix); bulk {
		if p == "" {
			return "", "", false
		}
		return p, job.ClassBulk, true
	}
	return rest, job.ClassTransactional, true
}

// ClassOfLane is the class of the lane stream key (either class's, of any provider).
func ClassOfLane(key string) job.Class {
	if strings.HasSuffix(key, bulkSuffix) {
		return job.ClassBulk
	}
	return job.ClassTransactional
}

// laneKeys are the lanes of providers on shard k, both classes.
func laneKeys(k Keys, providers []string) []string {
	out := make([]string, 0, 2*len(providers))
	for _, p := range providers {
		out = append(out, k.Lane(p), k.BulkLane(p))
	}
	return out
}

// WaitLanes blocks up to block (it must be positive) for a new entry in either lane of
// provider on shard and reads it: at most one entry of each class, transactional first. A
// lane whose classes both ran dry waits here, so that a job of either class is read as it
// arrives; one XREADGROUP over the two keys, which share the shard's hash slot.
func (s *Store) WaitLanes(ctx context.Context, shard int, provider string, block time.Duration) ([]Entry, error) {
	if block <= 0 {
		return nil, errors.New("stream: WaitLanes needs a positive block")
	}
	k := s.Keys(shard)
	return s.readStreams(ctx, shard, []string{k.Lane(provider), k.BulkLane(provider)}, 1, block)
}

// readStreams is read of several streams of one shard in one XREADGROUP: up to count entries
// of each, in the order of streams.
func (s *Store) readStreams(ctx context.Context, shard int, streams []string, count int, block time.Duration) ([]Entry, error) {
	if s.o.Consumer == "" {
		return nil, errors.New("stream: Options.Consumer is empty; a reading Store needs a consumer name")
	}
	args := &redis.XReadGroupArgs{Group: Group, Consumer: s.o.Consumer, Count: int64(count), Block: block}
	args.Streams = append(args.Streams, streams...)
	for range streams {
		args.Streams = append(args.Streams, ">")
	}
	res, err := s.blocking.XReadGroup(ctx, args).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOGROUP") {
		// A stream or its group is gone (a flushed or replaced Redis): recreate them rather
		// than fail forever, as read does.
		for _, st := range streams {
			if err := s.createGroup(ctx, st); err != nil {
				return nil, err
			}
		}
		res, err = s.blocking.XReadGroup(ctx, args).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream: read %s: %w", strings.Join(streams, ", "), err)
	}
	var out []Entry
	for _, want := range streams {
		for _, st := range res {
			if st.Stream != want {
				continue
			}
			for _, m := range st.Messages {
				out = append(out, Entry{Stream: st.Stream, ID: m.ID, Fields: stringFields(m.Values), Shard: shard})
			}
		}
	}
	return out, nil
}

// bulkArg is the class argument of to_delayed.lua: "bulk", or "" for transactional.
func bulkArg(c job.Class) string {
	if c.IsBulk() {
		return string(job.ClassBulk)
	}
	return ""
}
