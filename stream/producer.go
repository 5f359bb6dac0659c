package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Producer enqueues jobs for upstreams written in Go: one pipelined XADD per job, each to the
// intake stream of ShardOf(id). Upstreams in other languages do the same XADD (field "job").
type Producer struct {
	c      redis.UniversalClient
	prefix string
	shards int
	// checked is set once the shard count has been agreed with Redis (checkShards).
	checked atomic.Bool
}

// NewProducer returns a Producer for the given key prefix (DefaultPrefix when empty) and shard
// count (at least 1); both must match the workers' configuration: the first Enqueue checks the
// shard count against the one recorded in Redis (Store.CheckShards) and fails, writing nothing,
// when they differ.
func NewProducer(c redis.UniversalClient, prefix string, shards int) *Producer {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if shards < 1 {
		shards = 1
	}
	return &Producer{c: c, prefix: prefix, shards: shards}
}

// Enqueue writes each job, exactly as given, as the "job" field of a new intake entry, in one
// pipeline. Every job must be a JSON object with a non-empty string "id" (the shard depends on
// it); if any is not, nothing is written. Full validation is the workers' job: an invalid job
// is dead-lettered with its reason. It returns how many jobs, from the first, were written
// before any failure: a caller resumes from there.
func (p *Producer) Enqueue(ctx context.Context, jobs ...[]byte) (int, error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	shards := make([]int, len(jobs))
	for i, j := range jobs {
		var v struct {
			ID *string `json:"id"`
		}
		if err := json.Unmarshal(j, &v); err != nil {
			return 0, fmt.Errorf("stream: enqueue: job %d: not a JSON object with a string id", i)
		}
		if v.ID == nil || *v.ID == "" {
			return 0, fmt.Errorf("stream: enqueue: job %d: no id", i)
		}
		shards[i] = ShardOf(*v.ID, p.shards)
	}
	if !p.checked.Load() {
		if err := checkShards(ctx, p.c, p.prefix, p.shards, true); err != nil {
			return 0, err
		}
		p.checked.Store(true)
	}
	pipe := p.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(jobs))
	for i, j := range jobs {
		cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: KeysFor(p.prefix, shards[i]).Intake,
			Values: []any{"job", j},
		})
	}
	_, err := pipe.Exec(ctx)
	// n counts the unbroken run of written jobs from the first: a caller that resumes from
	// jobs[n] loses nothing. Jobs after the first failure may have been written too; sending
	// them again is harmless (a copy of an accepted job is acknowledged without a send).
	n := 0
	for _, c := range cmds {
		if c.Err() != nil {
			break
		}
		n++
	}
	if err != nil {
		return n, fmt.Errorf("stream: enqueue: job %d: %w", n, err)
	}
	return n, nil
}
