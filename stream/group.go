package stream

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// groupCommit sends the commands that callers issue at about the same time in one pipeline: one
// round trip and one write for many jobs, each caller still getting its own reply. A worker
// sends each job's state changes from that job's goroutine, tens at once; one round trip each
// cost more CPU (a write and a read per command, on both sides) than the commands themselves.
// The state changes every job makes (to_lane, finish) go further: the items of one script that
// share a pipeline become one call of that script (see batchItem), so Redis runs one script and
// one XACK and XDEL per stream for all of them. A Store keeps one per shard.
//
// With no linger a command that arrives with no pipeline in flight goes out at once, and the
// ones that arrive meanwhile go out together as soon as it returns. At a steady rate below what
// the worker can do (a provider's token bucket decides when each job goes), that means one job
// a pipeline; a linger lets a pipeline of records (finish: what comes after a send, which no
// send waits for) wait up to that long after its first one for others to join, so that they
// share the round trip and the script call. It bounds the delay each record gets: a pipeline
// goes as soon as lingerEnough calls wait or any call that is not a record does (a move to a
// lane, a check before a send: those go at once, and the records waiting go with them), and
// never later than the linger after its first call arrived.
//
// The sender goroutine lives while commands are queued and ends when the queue is empty. Every
// caller that waits for its reply returns after it; one that gives up (its ctx ended) may leave
// the last pipeline in flight for as long as the client's timeouts allow.
type groupCommit struct {
	c      redis.UniversalClient
	linger time.Duration // immutable; 0 sends at once
	mu     sync.Mutex
	queue  []*groupCall  // guarded by mu
	eager  int           // guarded by mu: queued calls that may not linger
	first  time.Time     // guarded by mu: when the oldest queued call arrived
	busy   bool          // guarded by mu: a sender goroutine is running
	enough chan struct{} // pinged when lingerEnough calls wait; buffered 1
}

// groupCall is one caller's command: a plain command, or an item of a batch script.
type groupCall struct {
	cmd  redis.Cmder
	item *batchItem
	done chan struct{}
}

// batchItem is one caller's part of a script call that the group commit merges with others of
// the same script, shard keys and shared arguments. The merged call's KEYS are the shared keys
// and then each item's own keys in turn (the script knows how many an item has), and its ARGV
// the shared arguments, the number of items, and each item's arguments preceded by their count.
// The script returns one integer per item, in order.
type batchItem struct {
	script     *redis.Script
	sharedKeys []string
	sharedArgs []any
	keys       []string
	args       []any
	// linger lets the call wait for others (Options.CommitLinger): a record, which no send
	// waits for.
	linger bool
	// Set by the sender before done is closed.
	result int64
	err    error
}

// maxGroup bounds one pipeline, so one reply never has to hold an unbounded number of results.
const maxGroup = 256

// maxBatch bounds the items of one merged script call: Redis runs nothing else while a script
// runs, so one call must stay short (a record of a campaign's recipient costs the most, about
// 60 µs; BENCHMARKS.md). The calls of a pipeline go one after another, and other clients' calls
// between them.
const maxBatch = 32

// lingerEnough is how many queued calls end a linger early: a pipeline that size shares its
// round trip well enough.
const lingerEnough = 64

func newGroupCommit(c redis.UniversalClient, linger time.Duration) *groupCommit {
	return &groupCommit{c: c, linger: linger, enough: make(chan struct{}, 1)}
}

// do sends cmd with whatever else is queued and returns its error. A caller whose ctx ends
// first returns ctx.Err(); the command may still run, as with any command whose reply was not
// awaited, which every state change of this package tolerates (each checks its owner).
func (g *groupCommit) do(ctx context.Context, cmd redis.Cmder) error {
	return g.enqueue(ctx, &groupCall{cmd: cmd, done: make(chan struct{})}, func() error { return cmd.Err() })
}

// run sends it as part of a merged script call and returns its result.
func (g *groupCommit) run(ctx context.Context, it *batchItem) (int64, error) {
	err := g.enqueue(ctx, &groupCall{item: it, done: make(chan struct{})}, func() error { return it.err })
	return it.result, err
}

func (g *groupCommit) enqueue(ctx context.Context, call *groupCall, result func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.first = time.Now()
	}
	g.queue = append(g.queue, call)
	if call.item == nil || !call.item.linger {
		g.eager++
	}
	if len(g.queue) == lingerEnough || g.eager == 1 {
		select {
		case g.enough <- struct{}{}:
		default:
		}
	}
	start := !g.busy
	g.busy = true
	g.mu.Unlock()
	if start {
		go g.send()
	}
	select {
	case <-call.done:
		return result()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send pipelines the queue until it is empty.
func (g *groupCommit) send() {
	for {
		g.waitLinger()
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		if len(g.queue) > 0 {
			g.first = time.Now()
		}
		for _, call := range batch {
			if call.item == nil || !call.item.linger {
				g.eager--
			}
		}
		g.mu.Unlock()
		g.exec(batch)
		for _, call := range batch {
			close(call.done)
		}
	}
}

// waitLinger waits until the oldest queued call has waited the linger, lingerEnough calls are
// queued, or one that may not linger is.
func (g *groupCommit) waitLinger() {
	if g.linger <= 0 {
		return
	}
	select {
	case <-g.enough: // left from before this wait; what it said is read below
	default:
	}
	g.mu.Lock()
	queued, eager, wait := len(g.queue), g.eager, time.Until(g.first.Add(g.linger))
	g.mu.Unlock()
	if queued == 0 || eager > 0 || queued >= lingerEnough || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-g.enough:
	}
}

// merged is one script call built from the items of several callers.
type merged struct {
	items []*batchItem
	cmd   *redis.Cmd
}

// exec sends batch in one pipeline, merging the items of each batch script.
func (g *groupCommit) exec(batch []*groupCall) {
	ctx := context.Background()
	var calls []*merged
	pipe := g.c.Pipeline()
	for _, call := range batch {
		if call.item == nil {
			// Each command carries its caller's context; the pipeline itself is bounded by the
			// client's read and write timeouts, not by any one caller.
			_ = pipe.Process(ctx, call.cmd)
			continue
		}
		var m *merged
		for _, c := range calls {
			if len(c.items) < maxBatch && sameKind(c.items[0], call.item) {
				m = c
				break
			}
		}
		if m == nil {
			m = &merged{}
			calls = append(calls, m)
		}
		m.items = append(m.items, call.item)
	}
	for _, m := range calls {
		keys, args := m.parts()
		m.cmd = m.items[0].script.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx) // errors are on each command
	for _, m := range calls {
		if redis.HasErrorPrefix(m.cmd.Err(), "NOSCRIPT") {
			// Redis restarted and forgot the scripts Setup loaded: EVAL loads it again.
			keys, args := m.parts()
			m.cmd = m.items[0].script.Eval(ctx, g.c, keys, args...)
		}
		m.distribute()
	}
}

// sameKind reports whether b may join a call whose first item is a.
func sameKind(a, b *batchItem) bool {
	if a.script != b.script || len(a.sharedKeys) != len(b.sharedKeys) || len(a.sharedArgs) != len(b.sharedArgs) {
		return false
	}
	for i := range a.sharedKeys {
		if a.sharedKeys[i] != b.sharedKeys[i] {
			return false
		}
	}
	for i := range a.sharedArgs {
		if a.sharedArgs[i] != b.sharedArgs[i] {
			return false
		}
	}
	return true
}

// parts are the merged call's KEYS and ARGV.
func (m *merged) parts() ([]string, []any) {
	first := m.items[0]
	nkeys, nargs := len(first.sharedKeys), len(first.sharedArgs)+1
	for _, it := range m.items {
		nkeys += len(it.keys)
		nargs += 1 + len(it.args)
	}
	keys := make([]string, 0, nkeys)
	keys = append(keys, first.sharedKeys...)
	args := make([]any, 0, nargs)
	args = append(args, first.sharedArgs...)
	args = append(args, len(m.items))
	for _, it := range m.items {
		keys = append(keys, it.keys...)
		args = append(args, len(it.args))
		args = append(args, it.args...)
	}
	return keys, args
}

// distribute hands each item its result, or the call's error.
func (m *merged) distribute() {
	v, err := m.cmd.Slice()
	if err == nil && len(v) != len(m.items) {
		err = errShortReply
	}
	for i, it := range m.items {
		if err != nil {
			it.err = err
			continue
		}
		n, ok := v[i].(int64)
		if !ok {
			it.err = errShortReply
			continue
		}
		it.result = n
	}
}
