package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// `gateway-lab priority` measures what a user of the worker gets from its priority classes and
// from its shutdown, against the real gateway-worker binary at the shipped registry's rates,
// Redis and pushsim: the wait of transactional jobs behind a bulk backlog (priority_backlog.go)
// and beside a large campaign (priority_campaign.go), and what a SIGTERM leaves behind
// (priority_stop.go). It shares the bench's rig: Redis, pushsim, the key, the subscription mix,
// the worker's command line and registry.

// Priority scenario names, in the order they run.
const (
	ScenarioBacklog  = "bulk-backlog"
	ScenarioCampaign = "campaign"
	ScenarioStop     = "stop"
)

// Scenarios are the priority scenarios' names, in the order they run.
func Scenarios() []string { return []string{ScenarioBacklog, ScenarioCampaign, ScenarioStop} }

// PriorityOptions are `gateway-lab priority`'s settings; the command takes each from a flag.
type PriorityOptions struct {
	// RedisURL is the Redis the scenarios use; "" starts a throwaway redis-server.
	RedisURL    string
	Only        string // comma-separated scenarios to run; "" runs them all
	Mix         string // provider=weight,...: the subscriptions' push services, as the bench's
	Concurrency int    // the worker's in-flight slots, shared by the mix as the bench shares them
	Sample      int    // pushsim checks the signature and decrypts one push in Sample

	Rate           int           // transactional jobs a second, one XADD each
	Baseline       time.Duration // transactional jobs alone before the bulk load, for comparison
	JobPayloadSize int           // plaintext bytes of every job (transactional and bulk)

	Bulk          int           // bulk-backlog: bulk jobs enqueued one at a time
	BulkProducers int           // bulk-backlog: goroutines enqueueing them
	Duration      time.Duration // campaign: how long it sends; bulk-backlog: its longest run

	Recipients  int // campaign: recipients added
	PayloadSize int // campaign: plaintext bytes of its message

	Messages int // stop: the backlog's jobs, transactional and bulk

	Short        bool
	Out          string // the folder for priority-report.json and priority-report.md
	WorkerBinary string // as Options.WorkerBinary
	Args         []string
}

// The sizes of a Short run.
const (
	ShortBulk         = 3000
	ShortRecipients   = 5000
	ShortStopMessages = 1000
	ShortDuration     = 5 * time.Second
	ShortBaseline     = time.Second
)

// subscriptionPool is how many subscriptions the scenarios' jobs and recipients go round: job
// i goes to subscription i mod the pool. The worker keeps no state per endpoint on the way of
// a job that is accepted, and no job names a recipient (no per-recipient cap applies), so a
// pool stands for as many distinct subscriptions while pushsim holds a few thousand.
const subscriptionPool = 2000

func (o PriorityOptions) effective() PriorityOptions {
	if o.Short {
		o.Bulk, o.Recipients, o.Messages = ShortBulk, ShortRecipients, ShortStopMessages
		o.Duration, o.Baseline = ShortDuration, ShortBaseline
	}
	return o
}

// Check refuses settings the scenarios cannot run with; RunPriority checks them too.
func (o PriorityOptions) Check() error {
	o = o.effective()
	switch {
	case o.Rate < 1 || o.Rate > 10_000:
		return errors.New("--rate must be 1 to 10000 jobs a second")
	case o.Baseline < 0:
		return errors.New("--baseline must be 0 or more")
	case o.JobPayloadSize < 0 || o.JobPayloadSize > 3993 || o.PayloadSize < 0 || o.PayloadSize > 3993:
		return errors.New("--payload-size and --job-payload-size must be 0 to 3993")
	case o.Bulk < 10 || o.Bulk > 10_000_000:
		return errors.New("--bulk must be 10 to 10000000 jobs")
	case o.BulkProducers < 1 || o.BulkProducers > 64:
		return errors.New("--bulk-producers must be 1 to 64")
	case o.Duration < time.Second:
		return errors.New("--duration must be at least 1s")
	case o.Recipients < 1 || o.Recipients > 10_000_000:
		return errors.New("--recipients must be 1 to 10000000")
	case o.Messages < 10 || o.Messages > 1_000_000:
		return errors.New("--messages must be 10 to 1000000")
	case o.Concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case o.Sample < 1:
		return errors.New("--sample must be at least 1")
	}
	if _, err := parseMix(o.Mix); err != nil {
		return err
	}
	for _, s := range o.scenarios() {
		if !slices.Contains(Scenarios(), s) {
			return fmt.Errorf("--only: unknown scenario %q (%s)", s, strings.Join(Scenarios(), ", "))
		}
	}
	return nil
}

func (o PriorityOptions) scenarios() []string {
	if o.Only == "" {
		return Scenarios()
	}
	var ss []string
	for s := range strings.SplitSeq(o.Only, ",") {
		ss = append(ss, strings.TrimSpace(s))
	}
	return ss
}

// benchOptions is the bench's rig for o: the pool of subscriptions in o's mix, the jobs'
// payload, the slots and pushsim's sampling.
func (o PriorityOptions) benchOptions() Options {
	pool := subscriptionPool
	if o.Short {
		pool = 200
	}
	return Options{RedisURL: o.RedisURL, Messages: pool, PayloadSize: o.JobPayloadSize, Mix: o.Mix,
		Concurrency: o.Concurrency, Sample: o.Sample, Out: o.Out, WorkerBinary: o.WorkerBinary}
}

// RunPriority runs the scenarios of o in turn against one Redis and one pushsim, each with its
// own worker(s) and key prefix (deleted after it), prints what each measured to out and writes
// priority-report.json and priority-report.md into o.Out.
func RunPriority(ctx context.Context, o PriorityOptions, out io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	o = o.effective()
	// pushsim keeps a few deliveries only: the scenarios read what they measure from the ledger.
	env, closeEnv, err := openEnv(ctx, o.benchOptions(), out, 10_000)
	if err != nil {
		return err
	}
	defer closeEnv()
	if env.registry, err = env.writeRegistry("priority-registry.yaml", true); err != nil {
		return err
	}
	rep := PriorityReport{
		Date:    time.Now().UTC().Truncate(time.Second),
		Command: strings.TrimSpace("gateway-lab priority " + strings.Join(o.Args, " ")),
		Machine: fmt.Sprintf("%s, %d CPUs, %s/%s, %s", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Load: fmt.Sprintf("the shipped registry.yaml's rates and bursts (%s), %d in-flight slots shared by the mix; %d subscriptions in the mix %s, jobs of %d bytes; transactional jobs at %d/s, %s alone first",
			shippedRates(), o.Concurrency, len(env.subs), describeMix(env.subs), o.JobPayloadSize, o.Rate, o.Baseline),
	}
	fmt.Fprintf(out, "machine:  %s\nload:     %s\n\n", rep.Machine, rep.Load)
	for _, s := range o.scenarios() {
		fmt.Fprintf(out, "%s: running\n", s)
		var err error
		switch s {
		case ScenarioBacklog:
			rep.Backlog, err = env.bulkBacklog(ctx, o)
		case ScenarioCampaign:
			rep.Campaign, err = env.campaignRun(ctx, o)
		case ScenarioStop:
			rep.Stop, err = env.stopRun(ctx, o)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	rep.Notes = priorityNotes(o)
	fmt.Fprintln(out)
	rep.writeText(out)
	return rep.save(o.Out, out)
}

// scenarioPrefix is a key prefix of its own for one scenario.
func scenarioPrefix(name string) string {
	return fmt.Sprintf("prio%s%d", strings.ReplaceAll(name, "-", ""), time.Now().UnixNano()%1_000_000)
}

// startPaced starts gateway-worker run on prefix at the shipped registry's rates, as consumer
// (its default name when ""), with its output kept for errors.
func (env *runEnv) startPaced(prefix, consumer string) (*child, error) {
	var extra []string
	if consumer != "" {
		extra = []string{"--consumer", consumer}
	}
	return startChild(env.workerArgv(prefix, env.registry, extra...), "")
}

// warmUp sends a job to every push service of the mix through the worker(s) on prefix and waits
// for their records, so that connections are open and the worker has finished starting before
// anything is measured. It returns how many jobs that was.
func (env *runEnv) warmUp(ctx context.Context, prefix string, exited <-chan struct{}) (int, error) {
	var warm [][]byte
	for i, s := range env.warm {
		warm = append(warm, env.job(fmt.Sprintf("warm-%d", i), s))
	}
	if _, err := stream.NewProducer(env.rdb, prefix, 1).Enqueue(ctx, warm...); err != nil {
		return 0, err
	}
	if err := env.waitRecords(ctx, stream.KeysFor(prefix, 0), int64(len(warm)), exited, 60*time.Second); err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	return len(warm), nil
}

// failWith adds what the worker c printed last to err: what says why it went wrong.
func failWith(err error, c *child) error {
	if c == nil {
		return err
	}
	return fmt.Errorf("%w\n%s", err, lastLines(c.stderr.String(), 5))
}

// pause waits d, or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
