// Command gateway-worker delivers Web Push messages. Each subcommand lives in its own file;
// main only turns signals into a context and picks the subcommand.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: it parses its own flags from args and returns the exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
	// hidden commands are run by other commands (bench's contenders), not by people: usage
	// leaves them out.
	hidden bool
}

func commands() []command {
	return []command{
		{"run", "the worker: deliver jobs from Redis Streams", cmdRun, false},
		{"enqueue", "put JSON-lines jobs on the intake streams", cmdEnqueue, false},
		{"audit", "check that every job id reached exactly one terminal record", cmdAudit, false},
		{"send", "send one message through the real adapter path and print its outcome", cmdSend, false},
		{"keygen", "make a VAPID key pair", cmdKeygen, false},
		{"check", "validate a registry file", cmdCheck, false},
		{"inventory", "count a subscription export per provider and show the in-flight budgets", cmdInventory, false},
		{"pushsim", "run the push service simulator", cmdPushsim, false},
		{"demo", "a minute of traffic to the simulated push services, a fault halfway, a live table and a report", cmdDemo, false},
		{"bench", "deliver the same messages through the gateway, webpush-go and Node web-push, and compare", cmdBench, false},
		{name: "bench-webpush-go", run: cmdBenchWebpushGo, hidden: true},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is main without the process: tests call it.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "gateway-worker: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gateway-worker <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		if c.hidden {
			continue
		}
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nEvery flag can also be set as GATEWAY_<FLAG> (e.g. GATEWAY_CA_FILE); a flag on the command line wins.")
	fmt.Fprintln(w, "Run 'gateway-worker <command> -h' for a command's flags.")
}
