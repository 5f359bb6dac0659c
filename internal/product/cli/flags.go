// Package cli is what the project's commands (gateway-worker, gateway-lab, pushsim) share:
// one flag set with one help format (flags in groups, required flags, GATEWAY_<FLAG> from the
// environment, flags anywhere among the arguments), the exit codes, the table of subcommands,
// the transport flags that build a Sender, the input readers of `enqueue` and `campaign add`
// and the flags of `campaign create`, and the conventions of `gateway-worker run` that the lab
// relies on (its consumer names, its garbage collection target, its stats file).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Exit codes every command uses. A command documents what 1 means for it (the answer is no:
// a job not found, not every job finished); 3 is for a Redis (or other service) that could not
// be read or written, so a script can tell "no" from "could not ask".
const (
	ExitOK          = 0
	ExitNo          = 1
	ExitUsage       = 2
	ExitUnavailable = 3
)

// ListFlag is a flag that may repeat (--vapid-key A --vapid-key B). From the environment it
// takes a comma-separated list.
type ListFlag []string

func (l *ListFlag) String() string     { return strings.Join(*l, ",") }
func (l *ListFlag) Set(v string) error { *l = append(*l, v); return nil }

// CommaList is a ListFlag whose every value may also be a comma-separated list
// (--connect-to a:443=b:1,c:443=d:2), for values that never hold a comma themselves.
type CommaList struct{ L *ListFlag }

func (c CommaList) String() string {
	if c.L == nil {
		return ""
	}
	return c.L.String()
}

func (c CommaList) Set(v string) error {
	for one := range strings.SplitSeq(v, ",") {
		if one = strings.TrimSpace(one); one != "" {
			*c.L = append(*c.L, one)
		}
	}
	return nil
}

// Help is what a command's -h prints, before its flags.
type Help struct {
	// Usage is the synopsis after the command's name: "--redis URL [flags] JOB_ID".
	Usage string
	// Summary is one sentence: what the command does.
	Summary string
	// Details are paragraphs that follow the summary; optional.
	Details string
	// Examples are command lines, printed as they are.
	Examples []string
	// Args names the positional arguments for the messages that refuse them ("JOB_ID"). With
	// MinArgs and MaxArgs (-1: any number) it bounds how many there may be; the zero Help
	// takes none.
	Args             string
	MinArgs, MaxArgs int
	// Exit says what the exit codes other than 0 and 2 mean for this command; optional.
	Exit string
}

// FlagSet is a command's flags: a flag.FlagSet that reports errors instead of exiting, prints
// the one help format of the project, groups its flags under headings, knows which are
// required, reads GATEWAY_<FLAG> for those the command line leaves out, and takes flags before,
// between and after the positional arguments ("--" ends the flags).
type FlagSet struct {
	*flag.FlagSet
	stderr   io.Writer
	help     Help
	group    string            // the heading of the flags defined from now on
	groups   []string          // headings in the order of first use
	groupOf  map[string]string // flag name -> heading
	required []string          // flag names, in the order Require was given them
	counts   map[string]*int   // flag name -> value, of the flags defined by Count and CountVar
	set      map[string]bool   // flags given on the command line or by the environment
	args     []string          // positional arguments, after Parse
}

// NewFlagSet returns the flag set of a command, named as the command line names it
// ("gateway-worker status"), with its help.
func NewFlagSet(name string, stderr io.Writer, h Help) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Parse prints its own messages; the flag package's would repeat them
	fs.Usage = func() {}
	return &FlagSet{FlagSet: fs, stderr: stderr, help: h, groupOf: map[string]string{}, set: map[string]bool{}}
}

// Group puts the flags defined from now on (until the next Group) under heading in the help
// ("Redis", "Delivery", "Output"). Flags defined before any Group are listed under "Flags".
func (f *FlagSet) Group(heading string) {
	f.claim()
	f.group = heading
}

// claim files every flag defined since the last call under the current heading.
func (f *FlagSet) claim() {
	f.VisitAll(func(fl *flag.Flag) {
		if _, ok := f.groupOf[fl.Name]; ok {
			return
		}
		g := f.group
		if g == "" {
			g = "Flags"
		}
		f.groupOf[fl.Name] = g
		if !slices.Contains(f.groups, g) {
			f.groups = append(f.groups, g)
		}
	})
}

// Require marks flags the command cannot run without: the help says "(required)" and Parse
// refuses a command line (and environment) that leaves one out.
func (f *FlagSet) Require(names ...string) { f.required = append(f.required, names...) }

// CountVar defines an int flag that counts something (a limit, a number of rows), stored in p:
// Parse refuses a negative value, "--name must be at least 0, got -1", wherever it came from.
func (f *FlagSet) CountVar(p *int, name string, value int, usage string) {
	f.IntVar(p, name, value, usage)
	if f.counts == nil {
		f.counts = map[string]*int{}
	}
	f.counts[name] = p
}

// Count is CountVar with a new variable, which it returns.
func (f *FlagSet) Count(name string, value int, usage string) *int {
	p := new(int)
	f.CountVar(p, name, value, usage)
	return p
}

// IsSet reports whether the flag name was given, on the command line or by its variable.
func (f *FlagSet) IsSet(name string) bool { return f.set[name] }

// Args are the positional arguments, once Parse has run.
func (f *FlagSet) Args() []string { return f.args }

// NArg is the number of positional arguments.
func (f *FlagSet) NArg() int { return len(f.args) }

// Arg is the i-th positional argument, "" when there is none.
func (f *FlagSet) Arg(i int) string {
	if i < 0 || i >= len(f.args) {
		return ""
	}
	return f.args[i]
}

// Parse parses args, then fills every flag the command line left out from GATEWAY_<NAME>
// (upper case, dashes as underscores), then checks the positional arguments' count and the
// required flags. ok is false when the command must stop: code is then 0 after -h (the help is
// printed) and ExitUsage after a problem (printed, naming the flag or argument).
func (f *FlagSet) Parse(args []string) (code int, ok bool) {
	f.claim()
	if err := f.parseAll(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.PrintHelp(f.stderr)
			return ExitOK, false
		}
		return f.Fail(errors.New(flagError(err.Error(), args))), false
	}
	f.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if err := f.fromEnvironment(); err != nil {
		return f.Fail(err), false
	}
	if err := f.checkCounts(); err != nil {
		return f.Fail(err), false
	}
	if err := f.checkArgs(); err != nil {
		return f.Fail(err), false
	}
	var missing []string
	for _, name := range f.required {
		if !f.set[name] {
			missing = append(missing, "--"+name)
		}
	}
	switch len(missing) {
	case 0:
		return ExitOK, true
	case 1:
		return f.Fail(fmt.Errorf("%s is required", missing[0])), false
	default:
		return f.Fail(fmt.Errorf("%s and %s are required", strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])), false
	}
}

// parseAll parses flags wherever they are among args: the flag package stops at the first
// positional argument, so parsing resumes after each one, until "--", after which every word
// is positional.
func (f *FlagSet) parseAll(args []string) error {
	f.args = nil
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			return err
		}
		rest := f.FlagSet.Args()
		if len(rest) == 0 {
			return nil
		}
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
			f.args = append(f.args, rest...)
			return nil
		}
		f.args = append(f.args, rest[0])
		args = rest[1:]
	}
}

// fromEnvironment sets every flag not given on the command line from its variable.
func (f *FlagSet) fromEnvironment() error {
	var err error
	f.VisitAll(func(fl *flag.Flag) {
		if f.set[fl.Name] || err != nil {
			return
		}
		env := EnvName(fl.Name)
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		values := []string{v}
		if _, repeat := fl.Value.(*ListFlag); repeat {
			values = strings.Split(v, ",")
		}
		for _, one := range values {
			if e := f.Set(fl.Name, strings.TrimSpace(one)); e != nil {
				err = fmt.Errorf("%s (for --%s): %w", env, fl.Name, e)
				return
			}
		}
		f.set[fl.Name] = true
	})
	return err
}

// EnvName is the variable a flag may come from: GATEWAY_ and the name in upper case, dashes as
// underscores (--ca-file: GATEWAY_CA_FILE).
func EnvName(flagName string) string {
	return "GATEWAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// maxQuoted is the longest stray word a refusal repeats. A longer one is described by its
// length only: it may be a secret whose flag lost it to a space (--vapid-key= KEY), and a raw
// VAPID key is 43 characters.
const maxQuoted = 24

// checkCounts refuses the first negative count, in the order of the flags' names.
func (f *FlagSet) checkCounts() error {
	var err error
	f.VisitAll(func(fl *flag.Flag) {
		if p, ok := f.counts[fl.Name]; ok && *p < 0 && err == nil {
			err = fmt.Errorf("--%s must be at least 0, got %d", fl.Name, *p)
		}
	})
	return err
}

func (f *FlagSet) checkArgs() error {
	n, h := len(f.args), f.help
	if n < h.MinArgs {
		if h.Args == "" {
			return fmt.Errorf("missing argument")
		}
		return fmt.Errorf("missing %s", h.Args)
	}
	if h.MaxArgs >= 0 && n > h.MaxArgs {
		word := f.args[h.MaxArgs]
		quoted := fmt.Sprintf("%q", word)
		if len(word) > maxQuoted {
			quoted = fmt.Sprintf("of %d characters (not repeated: it may be a secret; check for a space after a flag's =)", len(word))
		}
		return fmt.Errorf("unexpected argument %s", quoted)
	}
	return nil
}

// Fail reports a value or argument the command refuses (on stderr, after the command's name,
// then the usage line and where the help is) and returns ExitUsage.
func (f *FlagSet) Fail(err error) int {
	fmt.Fprintf(f.stderr, "%s: %v\n", f.Name(), err)
	fmt.Fprintf(f.stderr, "usage: %s\nRun '%s -h' for the flags.\n", f.synopsis(), f.Name())
	return ExitUsage
}

// flagError rewords the flag package's parse errors so that each names its flag as the help
// spells it (--name) first: "invalid value "x" for flag -shards: ..." becomes
// "--shards: invalid value "x": ...".
//
// A word that is no flag the command has is repeated only when it is short: a long one may be a
// secret that lost its flag to a space (--vapid-key= -KEY, a raw key that starts with a dash).
func flagError(msg string, args []string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		if name = strings.TrimLeft(name, "-"); len(name) > maxQuoted {
			word := len(name) + 1
			for _, a := range args { // the word as given, its dashes counted
				if strings.TrimLeft(a, "-") == name {
					word = len(a)
				}
			}
			return fmt.Sprintf("unexpected argument of %d characters (not repeated: it may be a secret; check for a space after a flag's =)", word)
		}
		return fmt.Sprintf("unknown flag --%s", name)
	}
	if word, ok := strings.CutPrefix(msg, "bad flag syntax: "); ok && len(word) > maxQuoted {
		return fmt.Sprintf("bad flag syntax in a word of %d characters (not repeated: it may be a secret)", len(word))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return fmt.Sprintf("--%s needs a value", strings.TrimLeft(name, "-"))
	}
	for _, lead := range []string{"invalid value ", "invalid boolean value "} {
		rest, ok := strings.CutPrefix(msg, lead)
		if !ok {
			continue
		}
		// rest is: "<quoted value>" for flag -name: cause  (or "for -name:" for booleans)
		for _, sep := range []string{" for flag -", " for -"} {
			if i := strings.LastIndex(rest, sep); i >= 0 {
				value := rest[:i]
				name, cause, _ := strings.Cut(rest[i+len(sep):], ": ")
				return fmt.Sprintf("--%s: %s%s: %s", name, lead, value, cause)
			}
		}
	}
	return msg
}
