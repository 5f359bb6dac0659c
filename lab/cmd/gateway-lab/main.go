// Command gateway-lab runs the gateway where it can be watched and measured, never in
// production: `demo` (a minute of traffic to the simulated push services, a fault halfway, a
// live table and a report), `bench` (the gateway against the consumers users write without
// it) and `priority` (what the priority classes and the shutdown give a user). Their logic
// lives in lab/demo and lab/bench, in the lab's module of its own; main turns signals into a
// context and picks the subcommand.
package main

import (
	"context"
	"io"
	"os"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

func main() { os.Exit(cli.Process(runMain)) }

// runMain is main without the process: tests call it.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, "gateway-lab", commands(), args, stdout, stderr)
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "demo", Summary: "a minute of traffic to the simulated push services, a fault halfway, a live table and a report", Run: cmdDemo, Help: cli.Help{
			Usage: "[--redis URL] [--duration 1m] [--rate 200] [--fault PROVIDER=stall|503:RATIO|429:SECONDS|none] [--report FILE]",
			Summary: "Run the real pipeline on this machine for a minute (a Redis, the push service simulators over TLS and HTTP/2, jobs in the market mix, the worker), " +
				"redraw a per-provider table every second, inject a fault halfway, and write an HTML and PNG report.",
			Details: "Without --redis it starts a throwaway redis-server on a free port. With --redis URL it writes under a prefix of its own, " +
				"which it prints with the command that removes its keys afterwards.",
			Examples: []string{
				"gateway-lab demo",
				"gateway-lab demo --duration 2m --rate 500 --fault fcm=503:0.4",
				"gateway-lab demo --redis redis://127.0.0.1:6379/0 --fault none",
			},
			Exit: "1 the demo could not run (Redis, the simulators or the worker failed)",
		}},
		{Name: "bench", Summary: "deliver the same messages through the gateway, webpush-go and Node web-push, and compare", Run: cmdBench, Help: cli.Help{
			Usage: "[--redis URL] [--messages N] [--payload-size BYTES] [--concurrency N] [--mix WEIGHTS] [--only NAMES] [--profile] [--short]",
			Summary: "Deliver the same messages through the gateway worker, a plain Redis-stream consumer around webpush-go, one around Node's web-push, " +
				"and the RFC 8291 encryption alone, one after the other on this machine, and compare throughput, latency, CPU and Redis cost.",
			Details: "It writes bench-report.json and bench-report.md to --out; BENCHMARKS.md has a run and its reading.",
			Examples: []string{
				"gateway-lab bench",
				"gateway-lab bench --short --only gateway,webpush-go",
				"gateway-lab bench --messages 50000 --mix fcm=50,autopush=50 --profile",
			},
			Exit: "1 a contender failed",
		}},
		{Name: "priority", Summary: "what transactional jobs wait behind a bulk backlog and beside a large campaign, and what a SIGTERM leaves", Run: cmdPriority, Help: cli.Help{
			Usage: "[--redis URL] [--only bulk-backlog,campaign,stop] [--rate 20] [--bulk 200000] [--recipients 1000000] [--duration 2m] [--messages 10000] [--short]",
			Summary: "Run the real gateway-worker at the shipped registry's rates against Redis and pushsim on this machine: the wait of transactional jobs " +
				"(XADD to ledger record, by Redis's clock) behind a bulk backlog enqueued one job at a time and beside a campaign of many recipients " +
				"(with Redis's slow log and memory per recipient), and what SIGTERM to one of two workers leaves pending and how soon its jobs are recorded.",
			Details: "It writes priority-report.json and priority-report.md to --out. The full sizes take minutes and a few hundred MB of memory in Redis; --short runs in seconds.",
			Examples: []string{
				"gateway-lab priority --short",
				"gateway-lab priority --only bulk-backlog --bulk 20000",
				"gateway-lab priority --only campaign --recipients 1000000 --duration 2m --out DIR",
			},
			Exit: "1 a scenario failed (a job without its record, the worker or Redis failed)",
		}},
		{Name: "bench-webpush-go", Main: cmdBenchWebpushGo, Hidden: true},
	}
}
