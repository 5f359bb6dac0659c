package main

import (
	"context"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/product/buildinfo"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

func cmdVersion(_ context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	fmt.Fprintln(stdout, buildinfo.String("gateway-worker"))
	return cli.ExitOK
}
