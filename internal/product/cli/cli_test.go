package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseTakesTheEnvironmentWhereTheCommandLineIsSilent(t *testing.T) {
	t.Setenv("GATEWAY_CONNECT_TO", "a:443=b:1, c:443=d:2")
	t.Setenv("GATEWAY_CA_FILE", "from-env.pem")
	t.Setenv("GATEWAY_SUBJECT", "mailto:env@example.com")
	var tr Transport
	fs := NewFlagSet("test send", io.Discard, Help{})
	tr.Register(fs)
	if code, ok := fs.Parse([]string{"--subject", "mailto:flag@example.com"}); !ok {
		t.Fatalf("Parse: exit %d", code)
	}
	if tr.Subject != "mailto:flag@example.com" {
		t.Errorf("subject %q: the command line must win over GATEWAY_SUBJECT", tr.Subject)
	}
	if tr.CAFile != "from-env.pem" || !fs.IsSet("ca-file") {
		t.Errorf("ca-file %q (set: %v), want GATEWAY_CA_FILE's", tr.CAFile, fs.IsSet("ca-file"))
	}
	if got := tr.ConnectTo.String(); got != "a:443=b:1,c:443=d:2" {
		t.Errorf("connect-to %q, want GATEWAY_CONNECT_TO split at commas and trimmed", got)
	}
	if fs.IsSet("allow-net") {
		t.Error("allow-net is set though neither the command line nor the environment gave it")
	}
}

func TestCommaListTakesRepeatsAndLists(t *testing.T) {
	var tr Transport
	fs := NewFlagSet("test send", io.Discard, Help{})
	tr.Register(fs)
	if _, ok := fs.Parse([]string{"--connect-to", "a:443=b:1,c:443=d:2", "--connect-to", "e:443=f:3", "--allow-net", "10.0.0.0/8"}); !ok {
		t.Fatal("Parse refused the flags")
	}
	if d := cmp.Diff(ListFlag{"a:443=b:1", "c:443=d:2", "e:443=f:3"}, tr.ConnectTo); d != "" {
		t.Errorf("connect-to (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ListFlag{"10.0.0.0/8"}, tr.Allow); d != "" {
		t.Errorf("allow-net (-want +got):\n%s", d)
	}
}

func TestParseNamesTheVariableOfABadValue(t *testing.T) {
	t.Setenv("GATEWAY_SHARDS", "abc")
	var stderr bytes.Buffer
	fs := NewFlagSet("test audit", &stderr, Help{Usage: "--shards N"})
	fs.Int("shards", 1, "")
	code, ok := fs.Parse(nil)
	if ok || code != ExitUsage || !strings.HasPrefix(stderr.String(), "test audit: GATEWAY_SHARDS (for --shards)") {
		t.Fatalf("exit %d, stderr %q; want 2, naming GATEWAY_SHARDS and its flag", code, stderr.String())
	}
}

// TestCountTakesZeroAndRefusesANegativeValueFromTheEnvironment: a count of 0 (none, or all)
// is a value; a negative one is refused whether the command line or the variable gave it.
func TestCountTakesZeroAndRefusesANegativeValueFromTheEnvironment(t *testing.T) {
	fs := NewFlagSet("test ls", io.Discard, Help{})
	limit := fs.Count("limit", 20, "")
	if code, ok := fs.Parse([]string{"--limit", "0"}); !ok || *limit != 0 {
		t.Fatalf("--limit 0: exit %d, ok %v, limit %d; want it taken", code, ok, *limit)
	}
	t.Setenv("GATEWAY_LIMIT", "-3")
	var stderr bytes.Buffer
	fs = NewFlagSet("test ls", &stderr, Help{})
	var n int
	fs.CountVar(&n, "limit", 20, "")
	code, ok := fs.Parse(nil)
	if ok || code != ExitUsage || !strings.HasPrefix(stderr.String(), "test ls: --limit must be at least 0, got -3") {
		t.Fatalf("GATEWAY_LIMIT=-3: exit %d, stderr %q; want 2 and the refusal", code, stderr.String())
	}
}

// TestParseRefusals: every refusal exits 2, names the flag or the argument first, and ends with
// the usage line and where the help is.
func TestParseRefusals(t *testing.T) {
	tests := []struct {
		name string
		help Help
		args []string
		want string
	}{
		{"unknown flag", Help{}, []string{"--nope"}, "unknown flag --nope"},
		{"bad int", Help{}, []string{"--count", "x"}, `--count: invalid value "x": parse error`},
		{"bad bool", Help{}, []string{"--json=maybe"}, `--json: invalid boolean value "maybe": parse error`},
		{"no value", Help{}, []string{"--count"}, "--count needs a value"},
		{"stray word", Help{}, []string{"--count", "2", "stray"}, `unexpected argument "stray"`},
		{"stray secret", Help{}, []string{"--name=", strings.Repeat("k", 43)}, "unexpected argument of 43 characters"},
		{"stray secret with a dash", Help{}, []string{"--name=", "-" + strings.Repeat("k", 42)}, "unexpected argument of 43 characters"},
		{"too many", Help{Args: "FILE", MaxArgs: 1}, []string{"a", "b"}, `unexpected argument "b"`},
		{"too few", Help{Args: "JOB_ID", MinArgs: 1, MaxArgs: 1}, nil, "missing JOB_ID"},
		{"required", Help{}, []string{"--count", "2"}, "--name is required"},
		{"negative count", Help{}, []string{"--rows", "-1"}, "--rows must be at least 0, got -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			tc.help.Usage = "[flags]"
			fs := NewFlagSet("test cmd", &stderr, tc.help)
			fs.Int("count", 1, "how many")
			fs.Count("rows", 0, "at most `N` rows")
			fs.Bool("json", false, "as JSON")
			fs.String("name", "", "a `NAME`")
			fs.Require("name")
			if tc.name != "required" && tc.name != "too few" && tc.name != "too many" {
				tc.args = append([]string{"--name", "x"}, tc.args...)
			}
			if tc.name == "too many" || tc.name == "too few" {
				tc.args = append(tc.args, "--name", "x")
			}
			code, ok := fs.Parse(tc.args)
			got := stderr.String()
			if ok || code != ExitUsage || !strings.HasPrefix(got, "test cmd: "+tc.want) ||
				!strings.Contains(got, "usage: test cmd [flags]\nRun 'test cmd -h' for the flags.") {
				t.Fatalf("exit %d, ok %v, stderr %q; want 2 and %q, then the usage", code, ok, got, tc.want)
			}
			if strings.Contains(got, strings.Repeat("k", 42)) {
				t.Errorf("the stray secret was repeated: %q", got)
			}
		})
	}
	if fs := NewFlagSet("x", io.Discard, Help{}); fs.Fail(errors.New("--rate must be at least 1")) != ExitUsage {
		t.Error("Fail must return ExitUsage")
	}
}

// TestParseTakesFlagsAnywhere: flags before, between and after the positional arguments; "--"
// ends the flags.
func TestParseTakesFlagsAnywhere(t *testing.T) {
	fs := NewFlagSet("test", io.Discard, Help{Args: "ID", MaxArgs: -1})
	reason := fs.String("reason", "", "")
	grace := fs.Duration("grace", time.Second, "")
	if _, ok := fs.Parse([]string{"a", "--reason", "why", "b", "--grace", "5s", "--", "--c", "-"}); !ok {
		t.Fatal("Parse refused")
	}
	if *reason != "why" || *grace != 5*time.Second {
		t.Errorf("reason %q, grace %v: flags after a positional argument were not read", *reason, *grace)
	}
	if d := cmp.Diff([]string{"a", "b", "--c", "-"}, fs.Args()); d != "" {
		t.Errorf("positional arguments (-want +got):\n%s", d)
	}
	if fs.NArg() != 4 || fs.Arg(1) != "b" || fs.Arg(9) != "" {
		t.Errorf("NArg %d, Arg(1) %q, Arg(9) %q", fs.NArg(), fs.Arg(1), fs.Arg(9))
	}
}

func TestHelpFormat(t *testing.T) {
	var stderr bytes.Buffer
	fs := NewFlagSet("prog cmd", &stderr, Help{
		Usage:    "--redis URL [flags] JOB_ID",
		Summary:  "Do the thing.",
		Details:  "More about it.\n\nAnd a second paragraph.",
		Examples: []string{"prog cmd --redis redis://h:6379 job-1"},
		Exit:     "1 not found; 3 Redis could not be read",
	})
	fs.Group("Redis")
	fs.String("redis", "", "Redis `URL`")
	fs.String("prefix", "wp", "key prefix")
	fs.Int("shards", 1, "how many shards")
	fs.Group("Output")
	fs.Bool("json", false, "print JSON")
	fs.Duration("every", 0, "how often")
	fs.Require("redis")
	code, ok := fs.Parse([]string{"-h"})
	if ok || code != ExitOK {
		t.Fatalf("-h: exit %d, ok %v; want 0 and stop", code, ok)
	}
	want := `usage: prog cmd --redis URL [flags] JOB_ID

Do the thing.

More about it.

And a second paragraph.

examples:
  prog cmd --redis redis://h:6379 job-1

Redis:
  --prefix VALUE    key prefix (default "wp")
  --redis URL       Redis URL (required)
  --shards N        how many shards (default 1)

Output:
  --every DURATION  how often
  --json            print JSON

Every flag can also be set as GATEWAY_<FLAG> (GATEWAY_REDIS for --redis); the command line wins.
exit status: 0 done; 2 a flag or argument refused; 1 not found; 3 Redis could not be read
`
	if d := cmp.Diff(want, stderr.String()); d != "" {
		t.Errorf("help (-want +got):\n%s", d)
	}
}

func TestFlagErrorRewording(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -nope":                         "unknown flag --nope",
		"flag needs an argument: -redis":                               "--redis needs a value",
		`invalid value "x" for flag -shards: parse error`:              `--shards: invalid value "x": parse error`,
		`invalid value "a for flag -b" for flag -fault: bad`:           `--fault: invalid value "a for flag -b": bad`,
		`invalid boolean value "2" for -json: parse error`:             `--json: invalid boolean value "2": parse error`,
		"bad flag syntax: ---x":                                        "bad flag syntax: ---x",
		"flag provided but not defined: -" + strings.Repeat("k", 43):   "unexpected argument of 45 characters (not repeated: it may be a secret; check for a space after a flag's =)",
		"something the flag package will say one day about -a flag -b": "something the flag package will say one day about -a flag -b",
	} {
		if got := flagError(in, []string{"--" + strings.Repeat("k", 43)}); got != want {
			t.Errorf("flagError(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMainPicksTheCommand(t *testing.T) {
	var ran []string
	cmds := []Command{
		{Name: "one", Summary: "the first", Main: func(_ context.Context, args []string, _, _ io.Writer) int {
			ran = append(ran, strings.Join(append([]string{"one"}, args...), " "))
			return 3
		}},
		{Name: "secret", Hidden: true, Main: func(context.Context, []string, io.Writer, io.Writer) int { return 0 }},
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), "prog", cmds, []string{"one", "a", "b"}, &stdout, &stderr); code != 3 || len(ran) != 1 || ran[0] != "one a b" {
		t.Fatalf("Main one a b: exit %d, ran %v", code, ran)
	}
	for args, want := range map[string]int{"": 2, "-h": 0, "--help": 0, "help": 0, "nope": 2} {
		stderr.Reset()
		code := Main(context.Background(), "prog", cmds, strings.Fields(args), &stdout, &stderr)
		if code != want || !strings.Contains(stderr.String(), "usage: prog <command>") || !strings.Contains(stderr.String(), "  one  the first") {
			t.Errorf("Main %q: exit %d (want %d), stderr %q", args, code, want, stderr.String())
		}
		if strings.Contains(stderr.String(), "secret") {
			t.Errorf("Main %q: usage lists a hidden command: %q", args, stderr.String())
		}
	}
	stderr.Reset()
	if Main(context.Background(), "prog", cmds, []string{"nope"}, &stdout, &stderr); !strings.HasPrefix(stderr.String(), `prog: unknown command "nope"`) {
		t.Errorf("Main nope: stderr %q does not name the unknown command first", stderr.String())
	}
	stderr.Reset()
	if code := Main(context.Background(), "prog", cmds, []string{"--redis", "x", "run"}, &stdout, &stderr); code != ExitUsage ||
		!strings.HasPrefix(stderr.String(), `prog: "--redis" is a flag: give the command first`) {
		t.Errorf("Main --redis x run: exit %d, stderr %q; want 2 and the flag named as one", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("usage went to stdout: %q", stdout.String())
	}
}

// TestMainBuildsTheFlagSetFromHelp: a command with Run gets a FlagSet named after the program
// and the command, subcommands included, whose -h prints the command's Help.
func TestMainBuildsTheFlagSetFromHelp(t *testing.T) {
	var got []string
	show := func(_ context.Context, fs *FlagSet, args []string, _, _ io.Writer) int {
		verbose := fs.Bool("verbose", false, "say more")
		if code, ok := fs.Parse(args); !ok {
			return code
		}
		got = append(got, fmt.Sprintf("%s %v %v", fs.Name(), *verbose, fs.Args()))
		return ExitOK
	}
	cmds := []Command{
		{Name: "show", Help: Help{Usage: "[--verbose] ID", Summary: "Show one.", Args: "ID", MinArgs: 1, MaxArgs: 1}, Run: show},
		{Name: "dead", Sub: []Command{
			{Name: "show", Help: Help{Usage: "ENTRY", Summary: "Show a dead one.", Args: "ENTRY", MinArgs: 1, MaxArgs: 1}, Run: show},
		}},
	}
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{{"show", "--verbose", "a"}, {"dead", "show", "b"}} {
		if code := Main(context.Background(), "prog", cmds, args, &stdout, &stderr); code != ExitOK {
			t.Fatalf("Main %q: exit %d, stderr %q", args, code, stderr.String())
		}
	}
	if diff := cmp.Diff([]string{"prog show true [a]", "prog dead show false [b]"}, got); diff != "" {
		t.Errorf("flag sets (-want +got):\n%s", diff)
	}
	stderr.Reset()
	if code := Main(context.Background(), "prog", cmds, []string{"help", "dead", "show"}, &stdout, &stderr); code != ExitOK ||
		!strings.HasPrefix(stderr.String(), "usage: prog dead show ENTRY\n\nShow a dead one.\n") {
		t.Errorf("help dead show: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := Main(context.Background(), "prog", cmds, []string{"dead"}, &stdout, &stderr); code != ExitUsage ||
		!strings.Contains(stderr.String(), "usage: prog dead <command>") {
		t.Errorf("dead alone: exit %d, stderr %q; want the subcommands' usage", code, stderr.String())
	}
}

func TestQuantile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"median of four is the second (nearest rank)", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of a hundred is the 99th", ms(seq(100)...), 99, 99 * time.Millisecond},
		{"p99 of ten is the largest", ms(seq(10)...), 99, 10 * time.Millisecond},
		{"p0 is the smallest", ms(3, 5), 0, 3 * time.Millisecond},
	}
	for _, tc := range tests {
		if got := Quantile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: Quantile(p%d) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

func TestConsumerNameIsThePodNameAndASuffix(t *testing.T) {
	t.Setenv("POD_NAME", "gateway-7f9c")
	a, b := ConsumerName(), ConsumerName()
	if !strings.HasPrefix(a, "gateway-7f9c-") || len(a) != len("gateway-7f9c-")+8 || a == b {
		t.Fatalf("ConsumerName = %q, %q; want gateway-7f9c-<8 hex digits>, different each time", a, b)
	}
}
