package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/lab/bench"
)

func cmdBench(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var o bench.Options
	fs.Group("Redis")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis `URL` to use (default: start a throwaway redis-server on a free port); a server others use adds their commands and CPU to the Redis figures")
	fs.Group("Workload")
	fs.IntVar(&o.Messages, "messages", 20_000, "messages each contender delivers from a backlog (throughput, CPU, bytes)")
	fs.IntVar(&o.PayloadSize, "payload-size", 256, "plaintext `BYTES` per message (at most 3993)")
	fs.StringVar(&o.Mix, "mix", "fcm=72,autopush=19,apple=6,wns=3,unknown=1", "provider `WEIGHTS` of the subscriptions; unknown is self-hosted hosts in the fallback lane")
	fs.IntVar(&o.Concurrency, "concurrency", 64, "sends in flight at once, for every contender")
	fs.IntVar(&o.LatencyMessages, "latency-messages", 2000, "messages of the paced phase that measures enqueue-to-answer latency")
	fs.IntVar(&o.LatencyRate, "latency-rate", 500, "messages per second in the paced latency phase")
	fs.IntVar(&o.Sample, "sample", 50, "pushsim verifies the JWT signature and decrypts the body of one push in `N`")
	depths := fs.String("backlog-depths", "1000,200000", "comma-separated `JOBS` queued behind the paced gateway's measured deliveries, one run each (\"\": none), to show the cost per job does not grow with the backlog")
	fs.Group("Contenders")
	fs.StringVar(&o.Only, "only", "", "comma-separated contender `NAMES` to run (default all): "+strings.Join(bench.Contenders(), ","))
	fs.Group("Report")
	fs.StringVar(&o.Out, "out", ".", "`DIR` for bench-report.json and bench-report.md (and bench-gateway.pprof with --profile)")
	fs.BoolVar(&o.Profile, "profile", false, "write a CPU profile of the gateway worker to DIR/bench-gateway.pprof")
	fs.StringVar(&o.WorkerBinary, "worker-binary", "", "gateway-worker `BINARY` the gateway contender runs (default: the one beside this binary, else on PATH)")
	fs.StringVar(&o.NodeDir, "node-dir", "", "`DIR` where npm installs web-push and redis for the Node contender (default: the user cache directory)")
	fs.BoolVar(&o.Short, "short", false, fmt.Sprintf("a quick run for CI: %d messages, %d in the latency phase", bench.ShortMessages, bench.ShortLatencyMessages))
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	o.Args = args
	for d := range strings.SplitSeq(*depths, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		n, err := strconv.Atoi(d)
		if err != nil {
			return fs.Fail(fmt.Errorf("--backlog-depths: %q is not a number of jobs", d))
		}
		o.Depths = append(o.Depths, n)
	}
	if err := o.Check(); err != nil {
		return fs.Fail(err)
	}
	if err := bench.Run(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-lab bench:", err)
		return cli.ExitNo
	}
	return cli.ExitOK
}

// cmdBenchWebpushGo is the bench's webpush-go contender, which bench runs in a process of its
// own: see bench.WebpushGoContender.
func cmdBenchWebpushGo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: gateway-lab bench-webpush-go CONFIG.json (run by gateway-lab bench)")
		return cli.ExitUsage
	}
	if err := bench.WebpushGoContender(ctx, args[0], stdout); err != nil {
		fmt.Fprintln(stderr, "bench-webpush-go:", err)
		return 1
	}
	return 0
}
