// Package cli is what the project's commands (gateway-worker, gateway-lab, pushsim) share:
// flags that can also come from GATEWAY_<FLAG>, the table of subcommands, the transport flags
// that build a Sender, and the conventions of `gateway-worker run` that the lab relies on (its
// consumer names, its garbage collection target, its stats file).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// ListFlag is a flag that may repeat (--connect-to A --connect-to B).
type ListFlag []string

func (l *ListFlag) String() string     { return strings.Join(*l, ",") }
func (l *ListFlag) Set(v string) error { *l = append(*l, v); return nil }

// NewFlagSet returns a flag set, named as the command line names it ("gateway-worker run"),
// that reports errors instead of exiting.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses args, then fills every flag not given on the command line from
// GATEWAY_<NAME> (upper case, dashes as underscores): containers are configured by environment.
// A repeatable flag takes a comma-separated list from its variable.
func ParseFlags(fs *flag.FlagSet, args []string) error {
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
		if _, repeat := f.Value.(*ListFlag); repeat {
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

// NoArgs refuses words left after the flags: a stray word stops flag parsing, so every flag
// after it would be silently ignored.
func NoArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	err := fmt.Errorf("unexpected argument %q (flags after it were not read)", fs.Arg(0))
	fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
	return err
}

// UsageError reports a flag value the command refuses, as the flag package reports its own
// parse errors (on the flag set's output, after its name), and returns the exit code, 2.
func UsageError(fs *flag.FlagSet, err error) int {
	fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
	return 2
}

// ExitUsage maps a flag parsing error to its exit code: -h is not a failure.
func ExitUsage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
