package main

import (
	"context"
	"io"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

func cmdRegistry(_ context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if _, err := stdout.Write(webpushgateway.DefaultRegistry); err != nil {
		return failure(stderr, fs.Name(), cli.ExitNo, err)
	}
	return cli.ExitOK
}
