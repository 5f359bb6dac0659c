package stream

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"sort"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed upstream_groups.lua
	upstreamGroupsLua    string
	upstreamGroupsScript = redis.NewScript(upstreamGroupsLua)
)

// UpstreamGroup is a consumer group an upstream reads one of a shard's record streams with:
// the ledger ("results"), "gone" or "dead". The gateway reads none of them with a group; a
// group that stops reading keeps every entry it has not acknowledged from TrimRecords, so its
// stream grows without bound.
type UpstreamGroup struct {
	Shard int `json:"shard"`
	// Stream is "results", "gone" or "dead"; Key its key.
	Stream string `json:"stream"`
	Key    string `json:"key"`
	Group  string `json:"group"`
	// Lag is how many entries of the stream the group has not read yet; Estimated says that
	// Redis could not count it (an entry was deleted past the group's position) and Lag is
	// entries-added minus entries-read, at most the stream's length: deleted entries past the
	// group count as unread.
	Lag       int64 `json:"lag"`
	Estimated bool  `json:"lag_estimated,omitempty"`
	// Pending is how many entries the group read and has not acknowledged.
	Pending int64 `json:"pending"`
}

// recordStreams are the names UpstreamGroups reports, in the order it reads them.
var recordStreams = []string{"results", "gone", "dead"}

// UpstreamGroups reads the consumer groups on the ledger, gone and dead streams of shard, by
// stream and then group name: one script of a constant number of commands per group. The
// worker's statistics loop reads it for the metrics, `gateway-worker status` for its table.
func (s *Keyspace) UpstreamGroups(ctx context.Context, shard int) ([]UpstreamGroup, error) {
	k := KeysFor(s.o.Prefix, shard)
	keys := []string{k.Results, k.Gone, k.Dead}
	v, err := upstreamGroupsScript.Run(ctx, s.c, keys).Slice()
	if err != nil {
		return nil, fmt.Errorf("stream: consumer groups of the record streams of shard %d: %w", shard, err)
	}
	if len(v) != len(keys) {
		return nil, fmt.Errorf("stream: consumer groups of the record streams of shard %d: %w", shard, errShortReply)
	}
	var out []UpstreamGroup
	for i, x := range v {
		row, _ := x.([]any)
		if len(row) != 2 {
			return nil, fmt.Errorf("stream: consumer groups of %s: unexpected reply %v", keys[i], x)
		}
		groups, _ := row[1].([]any)
		for _, g := range groups {
			f, _ := g.([]any)
			if len(f) != 4 {
				return nil, fmt.Errorf("stream: consumer groups of %s: unexpected reply %v", keys[i], g)
			}
			name, _ := f[0].(string)
			pending, _ := f[1].(int64)
			lag, _ := f[2].(int64)
			est, _ := f[3].(int64)
			out = append(out, UpstreamGroup{Shard: shard, Stream: recordStreams[i], Key: keys[i], Group: name,
				Lag: lag, Estimated: est == 1, Pending: pending})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stream != out[j].Stream {
			return slices.Index(recordStreams, out[i].Stream) < slices.Index(recordStreams, out[j].Stream)
		}
		return out[i].Group < out[j].Group
	})
	return out, nil
}
