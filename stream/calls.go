package stream

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// CallCounter is a go-redis hook that counts what a client sends: round trips (one per command
// or pipeline sent) and commands. It is how the worker reports what each job costs Redis
// (`run --stats-file`, the pipeline benchmark); give it to Open in OpenOptions.Hooks.
type CallCounter struct {
	trips, commands atomic.Int64
}

// RoundTrips is the number of commands and pipelines sent so far.
func (c *CallCounter) RoundTrips() int64 { return c.trips.Load() }

// Commands is the number of commands sent so far, pipelined ones included. A script counts
// as one here; INFO commandstats on the server also counts what it calls.
func (c *CallCounter) Commands() int64 { return c.commands.Load() }

func (c *CallCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *CallCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		c.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (c *CallCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		c.commands.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
