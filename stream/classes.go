package stream

import (
	"context"
	_ "embed"
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

// LaneRead is how much one read of a provider's two lanes may take: what the lane has slots
// and tokens for.
type LaneRead struct {
	// Total bounds the entries of both lanes together.
	Total int
	// BulkFirst is how many bulk entries to read before the transactional lane (bulk's owed
	// share: dispatch's classes); BulkMax bounds the bulk entries in all. The transactional
	// lane gets what BulkFirst leaves of Total, and the bulk lane what is left after it.
	BulkFirst, BulkMax int
}

// LaneMark is where a provider's lanes stood for the group when a read left them drained: the
// last delivered id of each, which WaitLanes waits past.
type LaneMark struct{ tx, bulk string }

var (
	//go:embed read_lane.lua
	readLaneLua    string
	readLaneScript = redis.NewScript(readLaneLua)
)

// ReadLanes reads new entries of provider's two lanes on shard for this consumer, in one
// script, as r allows: transactional entries first in the result. When the read took nothing,
// drained is where the lanes stand, for WaitLanes; it is nil otherwise. A lane whose group is
// gone (a flushed or replaced Redis) gets it back. Lane entries are written only by this
// package's scripts, from checked intake entries, so their size is bounded.
func (s *Store) ReadLanes(ctx context.Context, shard int, provider string, r LaneRead) (entries []Entry, drained *LaneMark, err error) {
	if r.Total <= 0 {
		return nil, nil, nil
	}
	if s.o.Consumer == "" {
		return nil, nil, errors.New("stream: Options.Consumer is empty; a reading Store needs a consumer name")
	}
	k := s.Keys(shard)
	lanes := []string{k.Lane(provider), k.BulkLane(provider)}
	run := func() ([]any, error) {
		return readLaneScript.Run(ctx, s.c, lanes, Group, s.o.Consumer, r.Total, max(r.BulkFirst, 0), max(r.BulkMax, 0)).Slice()
	}
	v, err := run()
	if err != nil && strings.Contains(err.Error(), "NOGROUP") {
		for _, st := range lanes {
			if err := s.createGroup(ctx, st); err != nil {
				return nil, nil, err
			}
		}
		v, err = run()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stream: read the lanes of %s: %w", provider, err)
	}
	if len(v) < 4 {
		return nil, nil, fmt.Errorf("stream: read the lanes of %s: short reply", provider)
	}
	nTx, _ := v[0].(int64)
	nBulk, _ := v[1].(int64)
	if int64(len(v)) != 4+2*(nTx+nBulk) {
		return nil, nil, fmt.Errorf("stream: read the lanes of %s: reply of %d items for %d entries", provider, len(v), nTx+nBulk)
	}
	entries = make([]Entry, 0, nTx+nBulk)
	for i := range nTx + nBulk {
		lane := lanes[0]
		if i >= nTx {
			lane = lanes[1]
		}
		id, _ := v[4+2*i].(string)
		flat, _ := v[5+2*i].([]any)
		f := make(map[string]string, len(flat)/2)
		for j := 0; j+1 < len(flat); j += 2 {
			name, _ := flat[j].(string)
			val, _ := flat[j+1].(string)
			f[name] = val
		}
		entries = append(entries, Entry{Stream: lane, ID: id, Fields: f, Shard: shard})
	}
	if len(entries) == 0 {
		tx, _ := v[2].(string)
		bulk, _ := v[3].(string)
		drained = &LaneMark{tx: tx, bulk: bulk}
	}
	return entries, drained, nil
}

// WaitLanes blocks up to block for an entry of provider's lanes on shard after mark (of its
// transactional lane alone unless bulk), and reports whether one arrived. It reads nothing for
// the group (a plain XREAD of one entry of each lane, on the doorbell's connections, whose
// replies are capped as waitIntake's are): a lane waits here holding no slot and no token, and
// reads with ReadLanes once something came.
func (s *Store) WaitLanes(ctx context.Context, shard int, provider string, mark LaneMark, bulk bool, block time.Duration) (bool, error) {
	if block <= 0 {
		return false, nil
	}
	k := s.Keys(shard)
	streams := []string{k.Lane(provider), mark.tx}
	if bulk {
		streams = []string{k.Lane(provider), k.BulkLane(provider), mark.tx, mark.bulk}
	}
	err := s.bell.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: block}).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case errors.Is(err, errReplyTooLarge):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("stream: wait on the lanes of %s: %w", provider, err)
	}
	return true, nil
}

// bulkArg is the class argument of to_delayed.lua: "bulk", or "" for transactional.
func bulkArg(c job.Class) string {
	if c.IsBulk() {
		return string(job.ClassBulk)
	}
	return ""
}
