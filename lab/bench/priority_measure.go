package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
)

// What the priority scenarios measure with: transactional jobs written at a steady rate and
// timed on Redis's clock, from the intake entry's id (the producer's write) to the ledger
// record's id (the worker's record), and the records of a shard read as they come.

// classJob is job id to sub, of class ("" names none: a transactional job as today's upstreams
// write it).
func (env *runEnv) classJob(id string, sub job.Subscription, class string) []byte {
	m := map[string]any{"id": id, "subscription": sub, "payload": env.payload, "ttl": 3600, "urgency": "normal"}
	if class != "" {
		m["class"] = class
	}
	b, _ := json.Marshal(m)
	return b
}

// entryMs is the milliseconds part of a stream entry id: when Redis wrote it, by its clock.
func entryMs(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}

// redisMs is Redis's clock, in unix milliseconds: the clock entry ids are written by.
func (env *runEnv) redisMs(ctx context.Context) (int64, error) {
	t, err := env.rdb.Time(ctx).Result()
	return t.UnixMilli(), err
}

// txSent is one transactional job written: its id and its intake entry's time.
type txSent struct {
	id string
	at int64 // unix ms, Redis's clock
}

// txProducer writes transactional jobs to an intake at a steady rate, one XADD each, from
// start until finish: the traffic whose wait the scenarios measure.
type txProducer struct {
	env    *runEnv
	intake string
	every  time.Duration
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	sent   []txSent // guarded by mu
	err    error    // set before done is closed
}

// startTransactional writes a transactional job to intake rate times a second, in its own
// goroutine, until finish. Each goes to the next subscription of the pool.
func (env *runEnv) startTransactional(ctx context.Context, intake string, rate int) *txProducer {
	p := &txProducer{env: env, intake: intake, every: time.Second / time.Duration(rate), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(ctx) // owned by p: finish waits for it
	return p
}

func (p *txProducer) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-p.stop:
			return
		case <-ctx.Done():
			p.err = ctx.Err()
			return
		case <-tick.C:
		}
		id := fmt.Sprintf("t-%07d", n)
		raw := p.env.classJob(id, p.env.subs[n%len(p.env.subs)], "")
		eid, err := p.env.rdb.XAdd(ctx, &redis.XAddArgs{Stream: p.intake, Values: []any{"job", raw}}).Result()
		if err != nil {
			p.err = fmt.Errorf("transactional XADD: %w", err)
			return
		}
		p.mu.Lock()
		p.sent = append(p.sent, txSent{id: id, at: entryMs(eid)})
		p.mu.Unlock()
	}
}

// count is how many jobs have been written so far.
func (p *txProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent)
}

// finish stops the producer and returns what it wrote; it may be called again.
func (p *txProducer) finish() ([]txSent, error) {
	p.once.Do(func() { close(p.stop) })
	<-p.done
	return p.sent, p.err
}

// record is one terminal record of a job: ledger or dead.
type record struct {
	id       string
	at       int64 // unix ms of the record's entry id
	dead     bool
	code     string
	campaign string
}

// recordScan reads the records of one shard (ledger and dead streams) in order, from where it
// last stopped.
type recordScan struct {
	rdb  redis.UniversalClient
	keys [2]string // results, dead
	last [2]string // the last entry id read of each; "" none yet
	each func(record)
}

func (env *runEnv) scanRecords(results, dead string, each func(record)) *recordScan {
	return &recordScan{rdb: env.rdb, keys: [2]string{results, dead}, each: each}
}

// from makes the scan start after the given entry ids (of results and dead).
func (s *recordScan) from(results, dead string) *recordScan {
	s.last = [2]string{results, dead}
	return s
}

// poll reads every record written since the last poll.
func (s *recordScan) poll(ctx context.Context) error {
	const page = 5000
	for i, key := range s.keys {
		for {
			start := "-"
			if s.last[i] != "" {
				start = "(" + s.last[i]
			}
			msgs, err := s.rdb.XRangeN(ctx, key, start, "+", page).Result()
			if err != nil {
				return err
			}
			for _, m := range msgs {
				r := record{at: entryMs(m.ID), dead: i == 1}
				r.id, _ = m.Values["id"].(string)
				r.code, _ = m.Values["code"].(string)
				r.campaign, _ = m.Values["campaign"].(string)
				s.each(r)
			}
			if len(msgs) > 0 {
				s.last[i] = msgs[len(msgs)-1].ID
			}
			if len(msgs) < page {
				break
			}
		}
	}
	return nil
}

// txRecords waits until every job of sent has its record, reading the shard's records with
// scan (whose each must put the transactional ones in got), and returns an error naming how
// many are still missing after limit.
func txRecords(ctx context.Context, scan *recordScan, sent []txSent, got map[string]record, exited <-chan struct{}, limit time.Duration) error {
	return waitChild(ctx, exited, limit, 100*time.Millisecond, func() (bool, string, error) {
		if err := scan.poll(ctx); err != nil {
			return false, "", err
		}
		missing := 0
		for _, s := range sent {
			if _, ok := got[s.id]; !ok {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d transactional jobs have no record", missing, len(sent)), nil
	})
}

// Latency is the wait of a phase's transactional jobs: from the producer's XADD to the
// worker's ledger record, both by Redis's clock (the entries' ids), in milliseconds.
type Latency struct {
	Jobs     int     `json:"jobs"`           // transactional jobs written in the phase
	Recorded int     `json:"recorded"`       // of them, with a ledger record
	Dead     int     `json:"dead,omitempty"` // of them, with a dead record instead
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
}

// latencyOf is the Latency of the jobs of sent written at from <= at < to (unix ms).
func latencyOf(sent []txSent, got map[string]record, from, to int64) Latency {
	var l Latency
	var ds []time.Duration
	for _, s := range sent {
		if s.at < from || s.at >= to {
			continue
		}
		l.Jobs++
		r, ok := got[s.id]
		switch {
		case !ok:
		case r.dead:
			l.Dead++
		default:
			l.Recorded++
			ds = append(ds, time.Duration(r.at-s.at)*time.Millisecond)
		}
	}
	if len(ds) > 0 {
		slices.Sort(ds)
		l.P50, l.P99 = percentileMs(ds, 50), percentileMs(ds, 99)
		l.Max = float64(cli.Quantile(ds, 100).Milliseconds())
	}
	return l
}

func (l Latency) String() string {
	if l.Recorded == 0 {
		return fmt.Sprintf("%d jobs, none recorded", l.Jobs)
	}
	s := fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d jobs", l.P50, l.P99, l.Max, l.Jobs)
	if l.Recorded != l.Jobs {
		s += fmt.Sprintf(", %d recorded", l.Recorded)
	}
	if l.Dead > 0 {
		s += fmt.Sprintf(", %d dead", l.Dead)
	}
	return s + ")"
}

// CPUShare is what each process on the machine used over a phase, in cores (CPU seconds a
// second of wall time): the worker, redis-server, and this process (pushsim and the
// producers). The machine's cores are shared by all three.
type CPUShare struct {
	Worker float64 `json:"worker_cores"`
	Redis  float64 `json:"redis_cores"`
	Lab    float64 `json:"lab_cores"`
}

func (c CPUShare) String() string {
	return fmt.Sprintf("worker %.2f, redis %.2f, pushsim and producers %.2f cores", c.Worker, c.Redis, c.Lab)
}

// cpuMark is where the CPU counters stood at one moment.
type cpuMark struct {
	at     time.Time
	worker time.Duration
	redis  time.Duration
	lab    time.Duration
}

// markCPU reads the counters of the worker process pid, Redis and this process.
func (env *runEnv) markCPU(ctx context.Context, pid int) (cpuMark, error) {
	m := cpuMark{at: time.Now(), lab: selfCPU()}
	p, err := sampleProc(pid)
	if err != nil {
		return m, err
	}
	m.worker = p.cpu
	m.redis, err = redisCPU(ctx, env.rdb)
	return m, err
}

// since is the CPUShare from m to now.
func (m cpuMark) since(now cpuMark) CPUShare {
	wall := now.at.Sub(m.at).Seconds()
	if wall <= 0 {
		return CPUShare{}
	}
	return CPUShare{Worker: (now.worker - m.worker).Seconds() / wall, Redis: (now.redis - m.redis).Seconds() / wall, Lab: (now.lab - m.lab).Seconds() / wall}
}

// loadAverage is the machine's load average over the last minute, from /proc/loadavg.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
