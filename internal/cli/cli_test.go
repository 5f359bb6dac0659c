package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsTakesTheEnvironmentWhereTheCommandLineIsSilent(t *testing.T) {
	t.Setenv("GATEWAY_CONNECT_TO", "a:443=b:1, c:443=d:2")
	t.Setenv("GATEWAY_CA_FILE", "from-env.pem")
	t.Setenv("GATEWAY_SUBJECT", "mailto:env@example.com")
	var tr Transport
	fs := NewFlagSet("test send", io.Discard)
	tr.Register(fs)
	if err := ParseFlags(fs, []string{"--subject", "mailto:flag@example.com"}); err != nil {
		t.Fatal(err)
	}
	if tr.Subject != "mailto:flag@example.com" {
		t.Errorf("subject %q: the command line must win over GATEWAY_SUBJECT", tr.Subject)
	}
	if tr.CAFile != "from-env.pem" {
		t.Errorf("ca-file %q, want GATEWAY_CA_FILE's", tr.CAFile)
	}
	if got := tr.ConnectTo.String(); got != "a:443=b:1,c:443=d:2" {
		t.Errorf("connect-to %q, want GATEWAY_CONNECT_TO split at commas and trimmed", got)
	}
}

func TestParseFlagsNamesTheVariableOfABadValue(t *testing.T) {
	t.Setenv("GATEWAY_SHARDS", "abc")
	var stderr bytes.Buffer
	fs := NewFlagSet("test audit", &stderr)
	fs.Int("shards", 1, "")
	err := ParseFlags(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "GATEWAY_SHARDS") || !strings.HasPrefix(stderr.String(), "test audit: GATEWAY_SHARDS") {
		t.Fatalf("err %v, stderr %q; want both naming GATEWAY_SHARDS", err, stderr.String())
	}
}

func TestNoArgsAndUsageError(t *testing.T) {
	var stderr bytes.Buffer
	fs := NewFlagSet("test run", &stderr)
	grace := fs.Duration("grace", time.Second, "")
	if err := ParseFlags(fs, []string{"stray", "--grace", "5s"}); err != nil {
		t.Fatal(err)
	}
	if err := NoArgs(fs); err == nil || *grace != time.Second || !strings.Contains(stderr.String(), `test run: unexpected argument "stray"`) {
		t.Fatalf("NoArgs: %v, stderr %q", err, stderr.String())
	}
	stderr.Reset()
	if code := UsageError(fs, errors.New("--rate must be at least 1")); code != 2 || stderr.String() != "test run: --rate must be at least 1\n" {
		t.Fatalf("UsageError: %d, %q", code, stderr.String())
	}
	if ExitUsage(flag.ErrHelp) != 0 || ExitUsage(errors.New("bad")) != 2 {
		t.Fatal("ExitUsage: -h must exit 0 and any other parse error 2")
	}
}

func TestMainPicksTheCommand(t *testing.T) {
	var ran []string
	cmds := []Command{
		{Name: "one", Summary: "the first", Run: func(_ context.Context, args []string, _, _ io.Writer) int {
			ran = append(ran, strings.Join(append([]string{"one"}, args...), " "))
			return 3
		}},
		{Name: "secret", Hidden: true, Run: func(context.Context, []string, io.Writer, io.Writer) int { return 0 }},
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), "prog", cmds, []string{"one", "a", "b"}, &stdout, &stderr); code != 3 || len(ran) != 1 || ran[0] != "one a b" {
		t.Fatalf("Main one a b: exit %d, ran %v", code, ran)
	}
	for args, want := range map[string]int{"": 2, "-h": 0, "--help": 0, "help": 0, "nope": 2} {
		stderr.Reset()
		code := Main(context.Background(), "prog", cmds, strings.Fields(args), &stdout, &stderr)
		if code != want || !strings.Contains(stderr.String(), "usage: prog <command>") || !strings.Contains(stderr.String(), "  one       the first") {
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
	if stdout.Len() != 0 {
		t.Errorf("usage went to stdout: %q", stdout.String())
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
