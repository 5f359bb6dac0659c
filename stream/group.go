package stream

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// groupCommit sends the commands that callers issue at about the same time in one pipeline: one
// round trip and one write for many jobs, each caller still getting its own reply. A worker
// sends each job's state changes from that job's goroutine, tens at once; one round trip each
// cost more CPU (a write and a read per command, on both sides) than the commands themselves.
// It adds no wait: a command that arrives with no pipeline in flight goes out at once, and the
// ones that arrive meanwhile go out together as soon as it returns. A Store keeps one per shard.
//
// The sender goroutine lives while commands are queued and ends when the queue is empty. Every
// caller that waits for its reply returns after it; one that gives up (its ctx ended) may leave
// the last pipeline in flight for as long as the client's timeouts allow.
type groupCommit struct {
	c     redis.UniversalClient
	mu    sync.Mutex
	queue []*groupCall // guarded by mu
	busy  bool         // guarded by mu: a sender goroutine is running
}

type groupCall struct {
	cmd  redis.Cmder
	done chan struct{}
}

// maxGroup bounds one pipeline, so one reply never has to hold an unbounded number of results.
const maxGroup = 256

// do sends cmd with whatever else is queued and returns its error. A caller whose ctx ends
// first returns ctx.Err(); the command may still run, as with any command whose reply was not
// awaited, which every state change of this package tolerates (each checks its owner).
func (g *groupCommit) do(ctx context.Context, cmd redis.Cmder) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	call := &groupCall{cmd: cmd, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, call)
	start := !g.busy
	g.busy = true
	g.mu.Unlock()
	if start {
		go g.send()
	}
	select {
	case <-call.done:
		return cmd.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send pipelines the queue until it is empty.
func (g *groupCommit) send() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()

		// Each command carries its caller's context; the pipeline itself is bounded by the
		// client's read and write timeouts, not by any one caller.
		pipe := g.c.Pipeline()
		for _, call := range batch {
			_ = pipe.Process(context.Background(), call.cmd)
		}
		_, _ = pipe.Exec(context.Background()) // errors are on each command
		for _, call := range batch {
			close(call.done)
		}
	}
}
