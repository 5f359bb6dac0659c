package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

// depthRow is the gateway at the shipped registry's rates with depth jobs queued behind the
// ones it is measured on: Messages deliveries, counted once the intake has moved every queued
// job to its lane, so that what the worker and Redis spend per job with a deep backlog can be
// set beside a shallow one. The jobs are queued before the worker starts, with every provider
// paused (as `gateway-worker pause` does) until the intake has moved them all; the worker is
// stopped, and the jobs still queued deleted, once the window is measured.
func (env *runEnv) depthRow(ctx context.Context, depth int) (Row, error) {
	row := Row{Name: fmt.Sprintf("%s, %d queued", contenderPaced, depth), Depth: depth,
		What: fmt.Sprintf("gateway-paced with %d jobs queued behind the %d measured", depth, env.o.Messages)}
	prefix := fmt.Sprintf("benchdepth%d", time.Now().UnixNano()%1_000_000)
	store := inspect.New(env.rdb, stream.Options{Prefix: prefix})
	defer env.deletePrefix(ctx, prefix)
	reg, err := env.writeRegistry("bench-depth-registry.yaml", true)
	if err != nil {
		return row, err
	}
	producer := stream.NewProducer(env.rdb, prefix, 1)
	var warm [][]byte
	for i, s := range env.warm {
		warm = append(warm, env.job(fmt.Sprintf("warm-%d", i), s))
	}
	if _, err := producer.Enqueue(ctx, warm...); err != nil {
		return row, err
	}
	total := depth + env.o.Messages
	for i := 0; i < total; i += 1000 {
		var lines [][]byte
		for j := i; j < min(i+1000, total); j++ {
			lines = append(lines, env.job(fmt.Sprintf("d-%07d", j), env.subs[j%len(env.subs)]))
		}
		if _, err := producer.Enqueue(ctx, lines...); err != nil {
			return row, err
		}
	}
	for _, p := range benchProviders {
		if err := store.PauseProvider(ctx, inspect.Pause{Provider: p, Reason: "bench: queue the backlog first", At: time.Now()}); err != nil {
			return row, err
		}
	}
	env.sim.Reset()
	c, err := startChild(env.workerArgv(prefix, reg), "")
	if err != nil {
		return row, err
	}
	ph, err := env.depthWindow(ctx, c, store, len(warm))
	if err != nil {
		_ = c.stop(5 * time.Second)
		return row, fmt.Errorf("%w\n%s", err, lastLines(c.stderr.String(), 5))
	}
	if err := c.stop(30 * time.Second); err != nil {
		return row, err
	}
	row.Messages = env.o.Messages
	row.fillRates(ph)
	if ph.answered > 0 {
		row.RedisCommandsPerJob = float64(ph.redisCommands) / float64(ph.answered)
	}
	return row, nil
}

// depthWindow waits until the intake has moved every queued job to its lane, resumes the
// providers, and once the warm-up jobs (first in their lanes) are answered measures the
// worker, Redis and pushsim over the next Messages answers.
func (env *runEnv) depthWindow(ctx context.Context, c *child, store *inspect.Inspector, warm int) (phase, error) {
	ph := phase{errors: map[string]int{}}
	keys := store.Keys(0)
	err := waitChild(ctx, c.exited, 5*time.Minute, 50*time.Millisecond, func() (bool, string, error) {
		n, err := env.rdb.XLen(ctx, keys.Intake).Result()
		return n == 0, fmt.Sprintf("the intake still holds %d jobs", n), err
	})
	if err != nil {
		return ph, err
	}
	for _, p := range benchProviders {
		if _, err := store.ResumeProvider(ctx, p); err != nil {
			return ph, err
		}
	}
	if err := env.waitAnswers(ctx, warm, c.exited, 60*time.Second); err != nil {
		return ph, fmt.Errorf("warm-up: %w", err)
	}
	startSeq := env.lastSeq()
	answered0 := int(env.sim.Stats().Requests)
	before, err := env.sampleCosts(ctx, c.cmd.Process.Pid)
	if err != nil {
		return ph, err
	}
	limit := time.Duration(max(120, env.o.Messages/50)) * time.Second
	if err := env.waitAnswers(ctx, answered0+env.o.Messages, c.exited, limit); err != nil {
		return ph, err
	}
	after, err := env.sampleCosts(ctx, c.cmd.Process.Pid)
	if err != nil {
		return ph, err
	}
	ph.cpu, ph.peakRSS = after.proc.cpu-before.proc.cpu, after.proc.peakRSS
	ph.redisCPU, ph.redisCommands = after.redisCPU-before.redisCPU, after.commands-before.commands
	for _, d := range env.sim.DeliveriesSince(startSeq, "") {
		if ph.answered == env.o.Messages {
			break
		}
		ph.answered++
		if d.Code == "ACCEPTED" {
			ph.accepted++
		} else {
			ph.errors[fmt.Sprintf("%s %d", d.Code, d.Status)]++
		}
		if ph.first.IsZero() {
			ph.first = d.At
		}
		ph.last = d.At
	}
	return ph, nil
}

// deletePrefix removes every key under prefix: what a depth run left queued.
func (env *runEnv) deletePrefix(ctx context.Context, prefix string) {
	iter := env.rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			env.rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		env.rdb.Unlink(ctx, batch...)
	}
}

// costSample is what the measured window of a depth row reads at its start and its end: the
// worker process's CPU and peak RSS, and the commands and CPU of the Redis server.
type costSample struct {
	proc     procSample
	commands int64
	redisCPU time.Duration
}

// sampleCosts reads a costSample of the worker process pid.
func (env *runEnv) sampleCosts(ctx context.Context, pid int) (costSample, error) {
	var s costSample
	var err error
	if s.proc, err = sampleProc(pid); err != nil {
		return s, err
	}
	if s.commands, err = commandCalls(ctx, env.rdb); err != nil {
		return s, err
	}
	s.redisCPU, err = redisCPU(ctx, env.rdb)
	return s, err
}
