package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
)

func cmdCheck(_ context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Group("Delivery")
	registry := fs.String("registry", "", "provider table `FILE` to check (default: the registry.yaml built into this binary)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	path := *registry
	if fs.NArg() == 1 {
		if path != "" && path != fs.Arg(0) {
			return fs.Fail(errors.New("give the file once: as FILE or as --registry FILE"))
		}
		path = fs.Arg(0)
	}
	reg, err := cli.LoadRegistry(path)
	if err != nil {
		// One file:line: field: problem per line, as the loader formats them.
		fmt.Fprintln(stderr, err)
		return cli.ExitNo
	}
	name := path
	if name == "" {
		name = cli.BuiltinRegistryName
	}
	fmt.Fprintf(stdout, "%s: ok, %d providers\n", name, len(reg.Providers()))
	for _, p := range reg.Providers() {
		fmt.Fprintf(stdout, "  %-10s kind %-8s %6.0f req/s  %4d in flight  hosts %v\n", p.ID, p.Kind, p.Rate, p.MaxInFlight, p.Hosts)
	}
	return cli.ExitOK
}
