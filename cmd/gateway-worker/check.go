package main

import (
	"context"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

func cmdCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker check", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: gateway-worker check [FILE]   (default registry.yaml)") }
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	path := "registry.yaml"
	switch fs.NArg() {
	case 0:
	case 1:
		path = fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	reg, err := providers.Load(path)
	if err != nil {
		// One file:line: field: problem per line, as the loader formats them.
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok, %d providers\n", path, len(reg.Providers()))
	for _, p := range reg.Providers() {
		fmt.Fprintf(stdout, "  %-10s kind %-8s %6.0f req/s  %4d in flight  hosts %v\n", p.ID, p.Kind, p.Rate, p.MaxInFlight, p.Hosts)
	}
	return 0
}
