package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
)

func TestUsageListsTheLabsCommands(t *testing.T) {
	code, _, stderr := proctest.Run(t, runMain, "help")
	if code != 0 || !strings.Contains(stderr, "usage: gateway-lab <command>") {
		t.Fatalf("help: exit %d, %q", code, stderr)
	}
	for _, want := range []string{"  demo ", "  bench ", "  priority ", "GATEWAY_<FLAG>"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("usage lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "bench-webpush-go") {
		t.Errorf("usage lists the hidden contender command:\n%s", stderr)
	}
	if code, _, stderr := proctest.Run(t, runMain, "run"); code != 2 || !strings.Contains(stderr, `unknown command "run"`) {
		t.Errorf("run is the worker's, not the lab's: exit %d, %q", code, stderr)
	}
}

// TestRefusesBadFlags checks every refusal says what it refuses, before anything starts.
func TestRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"demo: unknown provider", []string{"demo", "--fault", "gcm=stall"}, `--fault "gcm=stall"`},
		{"demo: unknown fault", []string{"demo", "--fault", "fcm=melt"}, `unknown fault "melt"`},
		{"demo: too short", []string{"demo", "--duration", "1s"}, "--duration must be at least 2s"},
		{"demo: stray word", []string{"demo", "stray", "--rate", "5"}, `unexpected argument "stray"`},
		{"demo: a fault that does not exist", []string{"demo", "--fault", "autopush=explode"}, `--fault "autopush=explode": unknown fault "explode"`},
		{"demo: no rate", []string{"demo", "--rate", "0"}, "--rate at least 1"},
		{"demo: a rate that is no number", []string{"demo", "--rate", "x"}, `--rate: invalid value "x"`},
		{"demo: unknown flag", []string{"demo", "--speed", "9"}, "unknown flag --speed"},
		{"bench: a weight that is no number", []string{"bench", "--mix", "fcm=abc"}, `--mix: "fcm=abc" is not provider=weight`},
		{"bench: no sample", []string{"bench", "--sample", "0"}, "--sample must be at least 1"},
		{"bench: unknown contender", []string{"bench", "--only", "gateway,nope"}, `--only: unknown contender "nope"`},
		{"bench: bad mix", []string{"bench", "--mix", "fcm=x"}, `--mix: "fcm=x" is not provider=weight`},
		{"bench: too few messages", []string{"bench", "--messages", "5"}, "--messages must be at least 10"},
		{"bench: stray word", []string{"bench", "stray"}, `unexpected argument "stray"`},
		{"priority: unknown scenario", []string{"priority", "--only", "bulk-backlog,nope"}, `--only: unknown scenario "nope"`},
		{"priority: no rate", []string{"priority", "--rate", "0"}, "--rate must be 1 to 10000"},
		{"priority: too small a backlog", []string{"priority", "--bulk", "5"}, "--bulk must be 10 to 10000000"},
		{"priority: too short", []string{"priority", "--duration", "500ms"}, "--duration must be at least 1s"},
		{"priority: too large a message", []string{"priority", "--payload-size", "4000"}, "--payload-size and --job-payload-size must be 0 to 3993"},
		{"priority: stray word", []string{"priority", "stray"}, `unexpected argument "stray"`},
		{"bench-webpush-go without its config", []string{"bench-webpush-go"}, "usage: gateway-lab bench-webpush-go CONFIG.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := proctest.Run(t, runMain, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tc.want)
			}
			if tc.args[0] != "bench-webpush-go" && !strings.Contains(stderr, "usage: gateway-lab "+tc.args[0]) {
				t.Errorf("stderr %q has no usage line", stderr)
			}
		})
	}
}

func TestBenchWebpushGoReportsABadConfig(t *testing.T) {
	code, _, stderr := proctest.Run(t, runMain, "bench-webpush-go", filepath.Join(t.TempDir(), "none.json"))
	if code != 1 || !strings.Contains(stderr, "bench-webpush-go:") || !strings.Contains(stderr, "none.json") {
		t.Fatalf("exit %d, %q; want 1 naming the missing file", code, stderr)
	}
}

// TestHelpFormat: demo, bench and priority print the help every command prints.
func TestHelpFormat(t *testing.T) {
	for cmd, flag := range map[string]string{"demo": "--fault PROVIDER=stall|503:RATIO|429:SECONDS", "bench": "--mix WEIGHTS", "priority": "--only SCENARIOS"} {
		code, stdout, help := proctest.Run(t, runMain, cmd, "-h")
		if code != 0 || stdout != "" {
			t.Fatalf("%s -h: exit %d, stdout %q", cmd, code, stdout)
		}
		for _, want := range []string{"usage: gateway-lab " + cmd + " ", "\nexamples:\n  gateway-lab " + cmd, "\nRedis:\n  --redis URL",
			"\n  " + flag, "\nEvery flag can also be set as GATEWAY_<FLAG>", "\nexit status: 0 done; 2 a flag or argument refused"} {
			if !strings.Contains(help, want) {
				t.Errorf("%s -h lacks %q:\n%s", cmd, want, help)
			}
		}
	}
}
