package main

import (
	"context"
	"io"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/internal/cli"
)

func cmdRegistry(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker registry", stderr, cli.Help{
		Usage: "",
		Summary: "Print the provider table built into this binary (the registry.yaml every command uses without --registry), " +
			"as a starting point for your own: edit it, check it with `gateway-worker check FILE`, and give it to run, send and inventory with --registry FILE.",
		Examples: []string{
			"gateway-worker registry > registry.yaml",
			"gateway-worker check registry.yaml",
		},
		Exit: "1 standard output could not be written",
	})
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if _, err := stdout.Write(webpushgateway.DefaultRegistry); err != nil {
		return failure(stderr, fs.Name(), cli.ExitNo, err)
	}
	return cli.ExitOK
}
