package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// listFlag is a flag that may repeat (--connect-to A --connect-to B).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gateway-worker "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args, then fills every flag not given on the command line from
// GATEWAY_<NAME> (upper case, dashes as underscores): containers are configured by environment.
// A repeatable flag takes a comma-separated list from its variable.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := "GATEWAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		values := []string{v}
		if _, repeat := f.Value.(*listFlag); repeat {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if e := fs.Set(f.Name, strings.TrimSpace(one)); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
				return
			}
		}
	})
	if err != nil {
		// The flag package prints its own parse errors; these it never saw.
		fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
	}
	return err
}

// noArgs refuses words left after the flags: a stray word stops flag parsing, so every flag
// after it would be silently ignored.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	err := fmt.Errorf("unexpected argument %q (flags after it were not read)", fs.Arg(0))
	fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
	return err
}
