package main

import (
	"context"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/internal/cli"
)

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker version", stderr, cli.Help{
		Usage:    "",
		Summary:  "Print the version of this build (module version, else VCS revision, else devel) and the Go release that built it.",
		Examples: []string{"gateway-worker version", "gateway-worker --version"},
	})
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	fmt.Fprintln(stdout, buildinfo.String("gateway-worker"))
	return cli.ExitOK
}
