// Command gateway-worker delivers Web Push messages: `run` is the worker, and the other
// subcommands are what an operator runs beside it. It links only the product; the simulator
// (cmd/pushsim), the demo and the bench (cmd/gateway-lab) are commands of their own. Each
// subcommand lives in its own file; main only turns signals into a context and picks the
// subcommand.
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
	// --version as the first word is the version command, as in most tools.
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	return cli.Main(ctx, "gateway-worker", commands(), args, stdout, stderr)
}

func commands() []cli.Command {
	return []cli.Command{
		{Name: "run", Summary: "the worker: deliver jobs from Redis Streams", Run: cmdRun},
		{Name: "enqueue", Summary: "put JSON-lines jobs on the intake streams", Run: cmdEnqueue},
		{Name: "status", Summary: "queues, retries, live replicas and their breakers, pauses, Redis memory", Run: cmdStatus},
		{Name: "inspect", Summary: "where one job is: intake, lane, in flight, waiting to retry, or its record", Run: cmdInspect},
		{Name: "dead", Summary: "list, show, replay or purge dead-letter records", Run: cmdDead},
		{Name: "pause", Summary: "stop every worker reading a provider's lanes; its jobs wait in Redis", Run: cmdPause},
		{Name: "resume", Summary: "end a provider's pause", Run: cmdResume},
		{Name: "audit", Summary: "check that every job id reached exactly one terminal record", Run: cmdAudit},
		{Name: "send", Summary: "send one message through the real adapter path and print its outcome", Run: cmdSend},
		{Name: "keygen", Summary: "make a VAPID key pair, or print the public key of one", Run: cmdKeygen},
		{Name: "check", Summary: "validate a registry file", Run: cmdCheck},
		{Name: "registry", Summary: "print the built-in registry.yaml, a starting point for your own", Run: cmdRegistry},
		{Name: "inventory", Summary: "count a subscription export per provider and show the in-flight budgets", Run: cmdInventory},
		{Name: "version", Summary: "print the version of this build and of the Go that built it", Run: cmdVersion},
	}
}
