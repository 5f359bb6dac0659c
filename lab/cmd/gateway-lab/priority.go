package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/lab/bench"
)

func cmdPriority(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var o bench.PriorityOptions
	fs.Group("Redis")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis `URL` to use (default: start a throwaway redis-server on a free port); the campaign scenario sets its slow log for the run")
	fs.Group("Workload")
	fs.IntVar(&o.Rate, "rate", 20, "transactional jobs a second (`N`), one XADD each, throughout every scenario but stop")
	fs.DurationVar(&o.Baseline, "baseline", 10*time.Second, "transactional jobs alone for this long before the bulk work, for comparison")
	fs.IntVar(&o.JobPayloadSize, "job-payload-size", 256, "plaintext `BYTES` of every job (at most 3993)")
	fs.StringVar(&o.Mix, "mix", "fcm=72,autopush=19,apple=6,wns=3,unknown=1", "provider `WEIGHTS` of the subscriptions; unknown is self-hosted hosts in the fallback lane")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "the worker's in-flight slots, shared by the mix")
	fs.IntVar(&o.Sample, "sample", 50, "pushsim verifies the JWT signature and decrypts the body of one push in `N`")
	fs.IntVar(&o.Bulk, "bulk", 200_000, "bulk-backlog: bulk jobs enqueued one XADD each")
	fs.IntVar(&o.BulkProducers, "bulk-producers", 4, "bulk-backlog: goroutines enqueueing them")
	fs.DurationVar(&o.Duration, "duration", 2*time.Minute, "campaign: how long it sends; bulk-backlog: the longest run (it ends sooner once half the bulk jobs are recorded)")
	fs.IntVar(&o.Recipients, "recipients", 1_000_000, "campaign: recipients added")
	fs.IntVar(&o.PayloadSize, "payload-size", 2048, "campaign: plaintext `BYTES` of its message (at most 3993)")
	fs.IntVar(&o.Messages, "messages", 10_000, "stop: the backlog's jobs, transactional and bulk in turn")
	fs.Group("Scenarios")
	fs.StringVar(&o.Only, "only", "", "comma-separated `SCENARIOS` to run (default all): "+strings.Join(bench.Scenarios(), ","))
	fs.BoolVar(&o.Short, "short", false, fmt.Sprintf("a quick run for CI: %d bulk jobs, %d recipients, %d jobs for stop, %s of sending, %s alone",
		bench.ShortBulk, bench.ShortRecipients, bench.ShortStopMessages, bench.ShortDuration, bench.ShortBaseline))
	fs.Group("Report")
	fs.StringVar(&o.Out, "out", ".", "`DIR` for priority-report.json and priority-report.md")
	fs.StringVar(&o.WorkerBinary, "worker-binary", "", "gateway-worker `BINARY` to run (default: the one beside this binary, else on PATH)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	o.Args = args
	if err := o.Check(); err != nil {
		return fs.Fail(err)
	}
	if err := bench.RunPriority(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-lab priority:", err)
		return cli.ExitNo
	}
	return cli.ExitOK
}
