package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
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
	// No file to check (none there, not readable, not a regular file) is a refused argument,
	// not a registry that fails the check.
	if path != "" {
		if err := checkFile(path); err != nil {
			return fs.Fail(err)
		}
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

// checkFile refuses a path that is not a regular file this process can read.
func checkFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch {
	case info.IsDir():
		return fmt.Errorf("%s is a directory, not a registry file", path)
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (a device, pipe or socket), not a registry file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}
