// Command gateway-lab runs the gateway where it can be watched and measured, never in
// production: `demo` (a minute of traffic to the simulated push services, a fault halfway, a
// live table and a report) and `bench` (the gateway against the consumers users write without
// it). Their logic lives in internal/demo and internal/bench; main turns signals into a context
// and picks the subcommand.
package main

import (
	"context"
	"io"
	"os"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
)

func main() { os.Exit(cli.Process(runMain)) }

// runMain is main without the process: tests call it.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, "gateway-lab", commands(), args, stdout, stderr)
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "demo", Summary: "a minute of traffic to the simulated push services, a fault halfway, a live table and a report", Run: cmdDemo},
		{Name: "bench", Summary: "deliver the same messages through the gateway, webpush-go and Node web-push, and compare", Run: cmdBench},
		{Name: "bench-webpush-go", Run: cmdBenchWebpushGo, Hidden: true},
	}
}
