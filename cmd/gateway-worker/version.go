package main

import (
	"context"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/internal/cli"
)

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker version", stderr)
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	if err := cli.NoArgs(fs); err != nil {
		return 2
	}
	fmt.Fprintln(stdout, buildinfo.String("gateway-worker"))
	return 0
}
