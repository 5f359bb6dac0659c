package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// phase is one contender's measurements.
type phase struct {
	answered  int
	accepted  int
	errors    map[string]int
	first     time.Time
	last      time.Time
	cpu       time.Duration
	peakRSS   int64
	bytesIn   uint64
	latencies []time.Duration
	tokens    uint64
	// What the rest of the machine spent on the backlog: pushsim (this process) and Redis.
	simCPU, redisCPU time.Duration
	// For the gateway, whose records are measured too: the commands Redis ran for the backlog
	// (scripts' own calls included, the upstream's XADDs and the bench's polls taken out), and
	// what Redis holds more once the backlog is recorded (INFO used_memory). -1 when not measured.
	redisCommands, redisBytesKept int64
}

// drive runs the common part of a consumer contender: warm-up, backlog, paced latency phase.
// The process must already be running and reading prefix's intake stream (shard 0). keys, for
// the gateway, are the keys of that shard: the backlog phase then lasts until every job has
// its record (ledger or dead), and its Redis commands and memory are measured.
func (env *runEnv) drive(ctx context.Context, prefix string, pid int, exited <-chan struct{}, keys *stream.Keys) (phase, error) {
	ph := phase{redisCommands: -1, redisBytesKept: -1}
	producer := stream.NewProducer(env.rdb, prefix, 1)
	env.sim.Reset()
	// Warm-up: one message per push service, so connections are open and the process has
	// finished starting before anything is measured.
	var warm [][]byte
	for i, s := range env.warm {
		warm = append(warm, env.job(fmt.Sprintf("warm-%d", i), s))
	}
	if _, err := producer.Enqueue(ctx, warm...); err != nil {
		return ph, err
	}
	if err := env.waitAnswers(ctx, len(warm), exited, 60*time.Second); err != nil {
		return ph, fmt.Errorf("warm-up: %w", err)
	}
	// Backlog: every message at once, as fast as Redis takes them. The jobs are built before
	// the measurement starts; their XADD, like an upstream's, is in it.
	lines := make([][]byte, len(env.subs))
	for i, s := range env.subs {
		lines[i] = env.job(fmt.Sprintf("b-%06d", i), s)
	}
	startSeq := env.lastSeq()
	before, err := sampleProc(pid)
	if err != nil {
		return ph, err
	}
	statsBefore := env.sim.Stats()
	var cmdsBefore, memBefore int64
	if keys != nil {
		if err := env.waitRecords(ctx, *keys, int64(len(warm)), exited, 60*time.Second); err != nil {
			return ph, fmt.Errorf("warm-up: %w", err)
		}
		if memBefore, err = usedMemory(ctx, env.rdb); err != nil {
			return ph, err
		}
		if cmdsBefore, err = commandCalls(ctx, env.rdb); err != nil {
			return ph, err
		}
	}
	simBefore := selfCPU()
	redisBefore, redisErr := redisCPU(ctx, env.rdb)
	upstream := int64(len(lines)) // the upstream's XADDs
	if env.campaign {
		if upstream, err = env.enqueueCampaign(ctx, producer, prefix); err != nil {
			return ph, err
		}
	} else if _, err := producer.Enqueue(ctx, lines...); err != nil {
		return ph, err
	}
	limit := time.Duration(max(120, env.o.Messages/50)) * time.Second
	if err := env.waitAnswers(ctx, len(warm)+len(lines), exited, limit); err != nil {
		return ph, fmt.Errorf("backlog: %w", err)
	}
	if keys != nil {
		if err := env.waitRecords(ctx, *keys, int64(len(warm)+len(lines)), exited, limit); err != nil {
			return ph, fmt.Errorf("backlog: %w", err)
		}
		cmdsAfter, err := commandCalls(ctx, env.rdb)
		if err != nil {
			return ph, err
		}
		memAfter, err := usedMemory(ctx, env.rdb)
		if err != nil {
			return ph, err
		}
		// The upstream's XADDs are not the worker's work, nor the bench's own polls (two XLENs
		// each).
		ph.redisCommands = cmdsAfter - cmdsBefore - upstream - 2*env.polls
		ph.redisBytesKept = memAfter - memBefore
	}
	after, err := sampleProc(pid)
	if err != nil {
		return ph, err
	}
	statsAfter := env.sim.Stats()
	ph.simCPU = selfCPU() - simBefore
	if redisAfter, err := redisCPU(ctx, env.rdb); err == nil && redisErr == nil {
		ph.redisCPU = redisAfter - redisBefore
	}
	ph.cpu, ph.peakRSS = after.cpu-before.cpu, after.peakRSS
	ph.bytesIn = statsAfter.BytesIn - statsBefore.BytesIn
	ds := env.sim.DeliveriesSince(startSeq, "")
	ph.errors = map[string]int{}
	for _, d := range ds {
		ph.answered++
		if d.Code == "ACCEPTED" {
			ph.accepted++
		} else {
			ph.errors[fmt.Sprintf("%s %d", d.Code, d.Status)]++
		}
	}
	if len(ds) > 0 {
		ph.first, ph.last = ds[0].At, ds[len(ds)-1].At
	}

	// Latency: messages one at a time at a steady rate, each to its own subscription, timed
	// from just before its XADD to pushsim receiving it.
	latSeq := env.lastSeq()
	sent := make(map[string]time.Time, env.o.LatencyMessages)
	tick := time.NewTicker(time.Second / time.Duration(env.o.LatencyRate))
	defer tick.Stop()
	for i := range env.o.LatencyMessages {
		s := env.subs[i]
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ph, ctx.Err()
		}
		sent[s.Endpoint] = time.Now()
		if _, err := producer.Enqueue(ctx, env.job(fmt.Sprintf("l-%06d", i), s)); err != nil {
			return ph, err
		}
	}
	if err := env.waitAnswers(ctx, len(warm)+len(lines)+env.o.LatencyMessages, exited, 60*time.Second); err != nil {
		return ph, fmt.Errorf("latency phase: %w", err)
	}
	for _, d := range env.sim.DeliveriesSince(latSeq, "") {
		if t, ok := sent[d.Endpoint]; ok {
			ph.latencies = append(ph.latencies, d.At.Sub(t))
			delete(sent, d.Endpoint)
		}
	}
	slices.Sort(ph.latencies)
	ph.tokens = env.sim.Stats().Tokens
	return ph, nil
}

// enqueueCampaign writes the backlog as one campaign of the jobs' message to every
// subscription: its create entry and its recipients, in batches. It returns how many entries
// that wrote to the bulk intake, where campaign entries go (the upstream's XADDs).
func (env *runEnv) enqueueCampaign(ctx context.Context, producer *stream.Producer, prefix string) (int64, error) {
	intake := stream.KeysFor(prefix, 0).BulkIntake
	before, err := env.rdb.XInfoStream(ctx, intake).Result()
	if err != nil {
		return 0, err
	}
	msg, _ := json.Marshal(map[string]any{"id": "bench", "payload": env.payload, "ttl": 3600, "urgency": "normal"})
	if _, err := producer.CreateCampaign(ctx, msg); err != nil {
		return 0, err
	}
	rs := make([][]byte, len(env.subs))
	for i, s := range env.subs {
		rs[i], _ = json.Marshal(s)
	}
	if _, err := producer.AddRecipients(ctx, "bench", rs...); err != nil {
		return 0, err
	}
	after, err := env.rdb.XInfoStream(ctx, intake).Result()
	if err != nil {
		return 0, err
	}
	return after.EntriesAdded - before.EntriesAdded, nil
}

// waitRecords waits until the shard of keys holds n terminal records (ledger and dead). It
// counts its polls in env.polls since the last call, so their XLENs can be taken out of the
// commands Redis ran.
func (env *runEnv) waitRecords(ctx context.Context, keys stream.Keys, n int64, exited <-chan struct{}, limit time.Duration) error {
	env.polls = 0
	return waitChild(ctx, exited, limit, 5*time.Millisecond, func() (bool, string, error) {
		env.polls++
		pipe := env.rdb.Pipeline()
		res, dead := pipe.XLen(ctx, keys.Results), pipe.XLen(ctx, keys.Dead)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, "", err
		}
		got := res.Val() + dead.Val()
		return got >= n, fmt.Sprintf("%d of %d jobs recorded", got, n), nil
	})
}

func (env *runEnv) lastSeq() uint64 {
	ds := env.sim.DeliveriesSince(0, "")
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)-1].Seq
}

// waitAnswers waits until pushsim has answered n requests since its last Reset.
func (env *runEnv) waitAnswers(ctx context.Context, n int, exited <-chan struct{}, limit time.Duration) error {
	return waitChild(ctx, exited, limit, 20*time.Millisecond, func() (bool, string, error) {
		got := env.sim.Stats().Requests
		return got >= uint64(n), fmt.Sprintf("pushsim answered %d of %d requests", got, n), nil
	})
}

// waitChild calls check every interval until it reports done, while a child process runs. check
// also says where things stand ("3 of 5 jobs recorded"), which the error repeats when limit
// passes or the child exits (exited is closed) first: the last thing seen is what says why.
func waitChild(ctx context.Context, exited <-chan struct{}, limit, interval time.Duration, check func() (done bool, state string, err error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, state, err := check()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s after %s", state, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("the process exited: %s", state)
		case <-time.After(interval):
		}
	}
}

// measure runs a contender: it starts its process in dir, drives it through the warm-up, the
// backlog and the latency phase on prefix's stream, and stops it. keys are the gateway's (see
// drive), nil for the other contenders.
func (env *runEnv) measure(ctx context.Context, argv []string, dir, prefix string, keys *stream.Keys) (phase, *child, error) {
	c, err := startChild(argv, dir)
	if err != nil {
		return phase{}, nil, err
	}
	ph, err := env.drive(ctx, prefix, c.cmd.Process.Pid, c.exited, keys)
	if err == nil {
		// The high-water mark the kernel keeps for the process's memory since its exec, read
		// while it still runs: the rusage of a reaped child would also count the RSS of this
		// process when it forked it.
		var last procSample
		if last, err = sampleProc(c.cmd.Process.Pid); err == nil {
			ph.peakRSS = last.peakRSS
		}
	}
	if err != nil {
		_ = c.stop(5 * time.Second)
		// What the process printed says why: its summary (the plain consumers count their
		// failures by status) and its last errors.
		return ph, c, fmt.Errorf("%w\n%s\n%s", err, lastLines(c.stdout.String(), 3), lastLines(c.stderr.String(), 5))
	}
	return ph, c, c.stop(30 * time.Second)
}

// child is a contender's process.
type child struct {
	cmd     *exec.Cmd
	stdout  *lockedWriter
	stderr  *lockedWriter
	exited  chan struct{}
	waitErr error // set before exited is closed
}

func startChild(argv []string, dir string) (*child, error) {
	c := &child{stdout: &lockedWriter{w: &strings.Builder{}}, stderr: &lockedWriter{w: &strings.Builder{}}, exited: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// stop asks the process to finish (SIGTERM) and waits; past limit it is killed.
func (c *child) stop(limit time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(limit):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("did not stop within %s of SIGTERM", limit)
	}
	if c.waitErr != nil {
		return fmt.Errorf("%v: %s", c.waitErr, lastLines(c.stderr.String(), 5))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockedWriter lets a child's output be read while the child still writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
