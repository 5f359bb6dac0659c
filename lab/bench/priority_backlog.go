package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// BacklogResult is the bulk-backlog scenario: an upstream that knows nothing of campaigns
// enqueues a large bulk backlog one job at a time while transactional jobs keep arriving.
type BacklogResult struct {
	Bulk        int     `json:"bulk_jobs"`
	Producers   int     `json:"bulk_producers"`
	EnqueueSecs float64 `json:"bulk_enqueue_seconds"` // from the first bulk XADD to the last
	Rate        int     `json:"transactional_per_second"`
	Alone       Latency `json:"transactional_alone"`  // before the bulk load
	Behind      Latency `json:"transactional_behind"` // from the first bulk XADD to the run's end
	// Behind in two: while the bulk jobs were being enqueued, and after the last of them.
	Enqueuing     Latency `json:"transactional_while_bulk_enqueued"`
	Enqueued      Latency `json:"transactional_after_bulk_enqueued"`
	RunSecs       float64 `json:"run_seconds"`          // from the first bulk XADD to the run's end
	Ended         string  `json:"ended"`                // what ended the run
	BulkRecorded  int     `json:"bulk_recorded_in_run"` // bulk jobs with a record within the run
	BulkPerSec    float64 `json:"bulk_per_second"`      // BulkRecorded / RunSecs
	BulkShare     float64 `json:"bulk_share_recorded"`  // BulkRecorded / Bulk
	ProviderCodes string  `json:"pushsim_answers"`
	// CPU is what the worker, Redis and this process used from the first bulk XADD to the
	// run's end; LoadAvg the machine's load average over the minute before the run's end.
	CPU     CPUShare `json:"cpu"`
	LoadAvg float64  `json:"load_average_1m"`
}

// bulkBacklog runs the bulk-backlog scenario: the paced worker, transactional jobs alone for
// o.Baseline, then o.Bulk bulk jobs enqueued one XADD each by o.BulkProducers goroutines while
// the transactional jobs go on, until half the bulk jobs have their record or o.Duration has
// passed since the first of them.
func (env *runEnv) bulkBacklog(ctx context.Context, o PriorityOptions) (*BacklogResult, error) {
	res := &BacklogResult{Bulk: o.Bulk, Producers: o.BulkProducers, Rate: o.Rate}
	prefix := scenarioPrefix(ScenarioBacklog)
	defer env.deletePrefix(ctx, prefix)
	keys := stream.KeysFor(prefix, 0)
	env.sim.Reset()
	c, err := env.startPaced(prefix, "")
	if err != nil {
		return nil, err
	}
	defer c.stop(30 * time.Second)
	warm, err := env.warmUp(ctx, prefix, c.exited)
	if err != nil {
		return nil, failWith(err, c)
	}
	// The producers stop with the scenario, whichever way it ends.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tx := env.startTransactional(pctx, keys.Intake, o.Rate)
	if err := pause(ctx, o.Baseline); err != nil {
		return nil, err
	}
	bulkStart, err := env.redisMs(ctx)
	if err != nil {
		return nil, err
	}
	cpu0, err := env.markCPU(ctx, c.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	enqueued := env.enqueueBulk(pctx, prefix, o.Bulk, o.BulkProducers)

	// The run ends once half the bulk jobs have their record, or at o.Duration. The records
	// counted are every record less the warm-up's and the transactional jobs written (an upper
	// bound of theirs): the bulk count is never over.
	half := int64(o.Bulk / 2)
	deadline := time.Now().Add(o.Duration)
	err = waitChild(ctx, c.exited, o.Duration+time.Minute, 250*time.Millisecond, func() (bool, string, error) {
		pipe := env.rdb.Pipeline()
		r, d := pipe.XLen(ctx, keys.Results), pipe.XLen(ctx, keys.Dead)
		if _, err := pipe.Exec(ctx); err != nil {
			return false, "", err
		}
		bulk := r.Val() + d.Val() - int64(warm) - int64(tx.count())
		switch {
		case bulk >= half:
			res.Ended = "half the bulk jobs recorded"
		case time.Now().After(deadline):
			res.Ended = "--duration"
		}
		return res.Ended != "", fmt.Sprintf("%d of %d bulk jobs recorded", bulk, o.Bulk), nil
	})
	if err != nil {
		return nil, failWith(err, c)
	}
	runEnd, err := env.redisMs(ctx)
	if err != nil {
		return nil, err
	}
	cpu1, err := env.markCPU(ctx, c.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	res.CPU, res.LoadAvg = cpu0.since(cpu1), loadAverage()
	sent, txErr := tx.finish()
	enq := <-enqueued
	if txErr != nil || enq.err != nil {
		return nil, fmt.Errorf("producers: %v, %v", txErr, enq.err)
	}
	res.EnqueueSecs = float64(enq.last-bulkStart) / 1000
	res.RunSecs = float64(runEnd-bulkStart) / 1000

	got := map[string]record{}
	scan := env.scanRecords(keys.Results, keys.Dead, func(r record) {
		switch {
		case strings.HasPrefix(r.id, "t-"):
			got[r.id] = r
		case strings.HasPrefix(r.id, "b-") && r.at >= bulkStart && r.at <= runEnd:
			res.BulkRecorded++
		}
	})
	if err := txRecords(ctx, scan, sent, got, c.exited, 2*time.Minute); err != nil {
		return nil, failWith(err, c)
	}
	res.Alone = latencyOf(sent, got, 0, bulkStart)
	res.Behind = latencyOf(sent, got, bulkStart, runEnd+1)
	res.Enqueuing = latencyOf(sent, got, bulkStart, min(enq.last, runEnd)+1)
	res.Enqueued = latencyOf(sent, got, min(enq.last, runEnd)+1, runEnd+1)
	if res.RunSecs > 0 {
		res.BulkPerSec = float64(res.BulkRecorded) / res.RunSecs
	}
	res.BulkShare = float64(res.BulkRecorded) / float64(o.Bulk)
	res.ProviderCodes = answerCodes(env)
	if err := c.stop(30 * time.Second); err != nil {
		return nil, err
	}
	fmt.Fprintf(env.out, "%s: transactional alone %s; behind the bulk backlog %s; bulk %.0f/s over %.1f s (%s), enqueued in %.1f s; %s, load %.1f\n",
		ScenarioBacklog, res.Alone, res.Behind, res.BulkPerSec, res.RunSecs, res.Ended, res.EnqueueSecs, res.CPU, res.LoadAvg)
	return res, nil
}

// enqueued is what enqueueBulk's producers did: the last XADD's time (unix ms, Redis's clock),
// or the first error.
type enqueued struct {
	last int64
	err  error
}

// enqueueBulk writes n bulk jobs ("b-<i>", "class": "bulk", the pool's subscriptions in turn),
// each its own Producer.Enqueue, from producers goroutines at once, and says on the channel it
// returns when they are all written.
func (env *runEnv) enqueueBulk(ctx context.Context, prefix string, n, producers int) <-chan enqueued {
	done := make(chan enqueued, 1)
	p := stream.NewProducer(env.rdb, prefix, 1)
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range producers {
		wg.Add(1)
		go func() { // owned by enqueueBulk's waiter below
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				j := env.classJob(fmt.Sprintf("b-%07d", i), env.subs[i%len(env.subs)], "bulk")
				if _, err := p.Enqueue(ctx, j); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	go func() { // owned by enqueueBulk: it ends when the producers do
		wg.Wait()
		e := enqueued{err: firstErr}
		if e.err == nil {
			e.last, e.err = env.redisMs(ctx)
		}
		done <- e
	}()
	return done
}

// answerCodes is pushsim's answers since its last Reset, by code, as "ACCEPTED 1234".
func answerCodes(env *runEnv) string {
	byCode := map[string]uint64{}
	for _, codes := range env.sim.Stats().Codes {
		for code, n := range codes {
			byCode[code] += n
		}
	}
	var parts []string
	for code, n := range byCode {
		parts = append(parts, fmt.Sprintf("%s %d", code, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
