package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// Producer enqueues jobs for upstreams written in Go: one pipelined XADD per job, each to the
// intake of ShardOf(id) for its class (Keys.IntakeOf: a job whose class is "bulk" to the bulk
// intake, every other to the transactional one). Upstreams in other languages do the same
// XADD (field "job").
type Producer struct {
	c      redis.UniversalClient
	prefix string
	shards int
	wait   waitConfig // immutable after NewProducer
	// checked is set once the shard count has been agreed with Redis (checkShards).
	checked atomic.Bool
}

// ProducerOption changes how a Producer writes.
type ProducerOption func(*waitConfig)

// waitConfig is how Enqueue confirms replication; replicas 0 means it does not.
type waitConfig struct {
	replicas int
	timeout  time.Duration
}

// DefaultWaitTimeout is how long Enqueue waits for replicas when WaitReplicas is given no
// timeout.
const DefaultWaitTimeout = time.Second

// ErrNotReplicated says that jobs were written to a master but fewer of its replicas than
// WaitReplicas asked for acknowledged them in time: they are enqueued, but a failover before
// they reach a replica would lose them. Sending them again is safe (see Enqueue).
var ErrNotReplicated = errors.New("stream: enqueue: not acknowledged by enough replicas")

// WaitReplicas makes Enqueue return only once at least replicas replicas of every master that
// took its writes have acknowledged them (Redis's WAIT), waiting up to timeout
// (DefaultWaitTimeout when 0) per master. Redis replicates asynchronously: without the wait, a
// master that dies before its replica has received an acknowledged XADD takes the job with it,
// and the replica promoted in its place never heard of it. With it, a job Enqueue reports as
// written survives the failover of its master to a replica that acknowledged it (Redis
// Sentinel and Cluster promote the most up-to-date replica).
//
// WAIT counts the writes of the connection it runs on, so Enqueue sends each master's XADDs
// and then its WAIT on one connection: on Redis Cluster, one per master that owns a shard the
// batch writes to, at the same time. The client must be a *redis.Client (one node, or
// Sentinel's failover client) or a *redis.ClusterClient. replicas 0 waits for nothing.
func WaitReplicas(replicas int, timeout time.Duration) ProducerOption {
	return func(w *waitConfig) {
		w.replicas = max(replicas, 0)
		w.timeout = timeout
		if w.timeout <= 0 {
			w.timeout = DefaultWaitTimeout
		}
	}
}

// NewProducer returns a Producer for the given key prefix (DefaultPrefix when empty) and shard
// count (at least 1); both must match the workers' configuration: the first Enqueue checks the
// shard count against the one recorded in Redis (Store.Setup) and fails, writing nothing,
// when they differ.
func NewProducer(c redis.UniversalClient, prefix string, shards int, opts ...ProducerOption) *Producer {
	prefix = orDefaultPrefix(prefix)
	if shards < 1 {
		shards = 1
	}
	p := &Producer{c: c, prefix: prefix, shards: shards}
	for _, o := range opts {
		o(&p.wait)
	}
	return p
}

// Enqueue writes each job, exactly as given, as the "job" field of a new intake entry, in one
// pipeline (with WaitReplicas, one per master, each followed by WAIT). Every job must be a
// JSON object with a non-empty string "id" (the shard depends on it); if any is not, nothing
// is written. Full validation is the workers' job: an invalid job is dead-lettered with its
// reason. It returns how many jobs, from the first, were written (and, with WaitReplicas,
// acknowledged by the replicas) before any failure: a caller resumes from there. Jobs after
// that one may have been written too; sending them again is harmless while their first copy
// is held or was accepted, since a copy of such a job is acknowledged without a send
// (docs/job-format.md).
func (p *Producer) Enqueue(ctx context.Context, jobs ...[]byte) (int, error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	shards := make([]int, len(jobs))
	intakes := make([]job.Class, len(jobs))
	for i, j := range jobs {
		id, intake, err := job.PeekIntake(j)
		switch {
		case errors.Is(err, job.ErrNoID):
			return 0, fmt.Errorf("stream: enqueue: job %d: no id", i)
		case err != nil:
			return 0, fmt.Errorf("stream: enqueue: job %d: not a JSON object with a string id", i)
		}
		shards[i], intakes[i] = ShardOf(id, p.shards), intake
	}
	if !p.checked.Load() {
		if err := checkShards(ctx, p.c, p.prefix, p.shards, true); err != nil {
			return 0, err
		}
		p.checked.Store(true)
	}
	var errs []error
	if p.wait.replicas > 0 {
		errs = p.writeAndWait(ctx, jobs, shards, intakes)
	} else {
		errs = p.write(ctx, jobs, shards, intakes)
	}
	// n counts the unbroken run of written jobs from the first: a caller that resumes from
	// jobs[n] loses nothing.
	for n, err := range errs {
		if err != nil {
			return n, fmt.Errorf("stream: enqueue: job %d: %w", n, err)
		}
	}
	return len(jobs), nil
}

// write sends every XADD in one pipeline and returns each job's error.
func (p *Producer) write(ctx context.Context, jobs [][]byte, shards []int, intakes []job.Class) []error {
	pipe := p.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(jobs))
	for i, j := range jobs {
		cmds[i] = p.xadd(ctx, pipe, shards[i], intakes[i], j)
	}
	_, _ = pipe.Exec(ctx) // the errors are on each command
	errs := make([]error, len(jobs))
	for i, c := range cmds {
		errs[i] = c.Err()
	}
	return errs
}

func (p *Producer) xadd(ctx context.Context, pipe redis.Pipeliner, shard int, intake job.Class, raw []byte) *redis.StringCmd {
	return pipe.XAdd(ctx, &redis.XAddArgs{Stream: KeysFor(p.prefix, shard).IntakeOf(intake), Values: []any{"job", raw}})
}

// writeAndWait sends the XADDs of each master on one connection of its own, then WAIT on that
// connection, every master at the same time, and returns each job's error: its XADD's, or the
// WAIT's of its master when that fell short.
func (p *Producer) writeAndWait(ctx context.Context, jobs [][]byte, shards []int, intakes []job.Class) []error {
	errs := make([]error, len(jobs))
	var nodes []*redis.Client
	byNode := map[*redis.Client][]int{}
	name := map[*redis.Client]string{}
	switch c := p.c.(type) {
	case *redis.Client:
		nodes = []*redis.Client{c}
		name[c] = "the master"
		for i := range jobs {
			byNode[c] = append(byNode[c], i)
		}
	case *redis.ClusterClient:
		owner := map[int]*redis.Client{}
		for i, s := range shards {
			node, ok := owner[s]
			if !ok {
				var err error
				node, err = c.MasterForKey(ctx, KeysFor(p.prefix, s).Intake)
				if err != nil {
					errs[i] = err
					continue
				}
				owner[s] = node
			}
			if _, seen := byNode[node]; !seen {
				nodes = append(nodes, node)
				name[node] = "master " + node.Options().Addr
			}
			byNode[node] = append(byNode[node], i)
		}
	default:
		err := fmt.Errorf("WaitReplicas needs a *redis.Client or a *redis.ClusterClient, not %T", p.c)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Add(1)
		go func() { // owned by writeAndWait, which waits for it below
			defer wg.Done()
			p.writeNode(ctx, node, name[node], jobs, shards, intakes, byNode[node], errs)
		}()
	}
	wg.Wait()
	if cc, ok := p.c.(*redis.ClusterClient); ok {
		for _, err := range errs {
			if err != nil {
				// A master that died or lost its slots: the next call routes by a fresh map
				// rather than by the one that sent it here.
				cc.ReloadState(ctx)
				break
			}
		}
	}
	return errs
}

// writeNode writes the jobs at idx (in order) to node (name, for errors) on one connection and
// waits there for the replicas; it sets errs[i] for each of them that failed. Each goroutine writes only its
// own indices of errs.
func (p *Producer) writeNode(ctx context.Context, node *redis.Client, name string, jobs [][]byte, shards []int, intakes []job.Class, idx []int, errs []error) {
	conn := node.Conn()
	defer conn.Close()
	pipe := conn.Pipeline()
	cmds := make([]*redis.StringCmd, len(idx))
	for k, i := range idx {
		cmds[k] = p.xadd(ctx, pipe, shards[i], intakes[i], jobs[i])
	}
	_, _ = pipe.Exec(ctx) // the errors are on each command
	written := false
	for k, i := range idx {
		if errs[i] = cmds[k].Err(); errs[i] == nil {
			written = true
		}
	}
	if !written {
		return
	}
	got, err := conn.Wait(ctx, p.wait.replicas, p.wait.timeout).Result()
	if err == nil && got < int64(p.wait.replicas) {
		err = fmt.Errorf("%w: %d of %d replicas of %s acknowledged within %v", ErrNotReplicated, got, p.wait.replicas, name, p.wait.timeout)
	}
	if err != nil {
		for _, i := range idx {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
}
