package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const shippedRegistry = "../../registry.yaml"

// TestInventorySample runs the command on the sample export and checks the whole report: the
// provider mix, the unknown hosts, the budgets and the unreadable lines by number, and that no
// endpoint path (every one in the sample holds "SECRET") reaches the output.
func TestInventorySample(t *testing.T) {
	code, stdout, stderr := run(t, "inventory", "--registry", shippedRegistry, "testdata/subscriptions.txt")
	if code != 0 {
		t.Fatalf("inventory exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	want := []string{
		"14 subscriptions read, 5 lines could not be read",
		// provider, subscriptions, share
		`(?m)^fcm +5 +35\.7%$`,
		`(?m)^autopush +2 +14\.3%$`,
		`(?m)^apple +2 +14\.3%$`,
		`(?m)^wns +1 +7\.1%$`,
		`(?m)^fallback +4 +28\.6%$`,
		"unknown hosts \\(delivered through fallback\\): 3 hosts, 4 subscriptions",
		// busiest first, then by name
		`(?m)^  push\.example\.net +2\n  198\.51\.100\.7 +1\n  eu\.push\.example\.net:8443 +1$`,
		// no budget: in the shipped file: every provider gets its max_in_flight
		"1088 \\(\\.\\./\\.\\./registry\\.yaml sets no budget: the sum of max_in_flight\\)",
		`(?m)^fcm +8 +512 +512$`,
		`(?m)^fallback +8 +64 +64$`,
		`(?m)^total +1088$`,
		`(?m)^lines that could not be read: 5$`,
		`(?m)^  line 12: not https`,
		`(?m)^  line 17: not a valid JSON object$`,
		`(?m)^  line 18: no "endpoint"`,
		`(?m)^  line 19: endpoint is not a string$`,
		`(?m)^  line 20: bad endpoint`,
	}
	for _, w := range want {
		if !regexp.MustCompile(w).MatchString(stdout) {
			t.Errorf("output lacks %s:\n%s", w, stdout)
		}
	}
	assertNoEndpointPath(t, stdout+stderr)
}

// assertNoEndpointPath fails when out holds any part of an endpoint path of the sample.
func assertNoEndpointPath(t *testing.T, out string) {
	t.Helper()
	for _, leak := range []string{"SECRET", "/wpush", "/fcm/send", "/wp/", "token=", "/gcm/"} {
		if strings.Contains(out, leak) {
			t.Errorf("output contains %q, part of an endpoint path:\n%s", leak, out)
		}
	}
}

// TestInventoryBudget: the total shared is the registry's budget, or --total; the shares are
// Allocate's for the subscription mix.
func TestInventoryBudget(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(shippedRegistry)
	if err != nil {
		t.Fatal(err)
	}
	withBudget := filepath.Join(dir, "budget.yaml")
	s := strings.Replace(string(data), "# budget:\n#   total_in_flight: 768", "budget:\n  total_in_flight: 200", 1)
	if err := os.WriteFile(withBudget, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(dir, "subs.txt")
	var lines []string
	for i := range 90 {
		lines = append(lines, fmt.Sprintf("https://fcm.googleapis.com/fcm/send/SECRET-%d", i))
	}
	for i := range 10 {
		lines = append(lines, fmt.Sprintf("https://web.push.apple.com/SECRET-%d", i))
	}
	if err := os.WriteFile(export, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		// The three providers without subscriptions keep their floor 8; fcm and apple share
		// the other 176 at 90:10: 158.4 and 17.6, and the slot left goes to apple's .6.
		{"registry budget", []string{"--registry", withBudget, export}, []string{
			"in-flight budget per replica: 200 \\(budget.total_in_flight of " + regexp.QuoteMeta(withBudget) + "\\)",
			`(?m)^fcm +8 +512 +158$`, `(?m)^apple +8 +128 +18$`, `(?m)^autopush +8 +256 +8$`, `(?m)^total +200$`,
		}},
		{"--total wins", []string{"--registry", withBudget, "--total", "40", export}, []string{
			"in-flight budget per replica: 40 \\(from --total\\)",
			// floors 5*8 = 40: the whole total
			`(?m)^fcm +8 +512 +8$`, `(?m)^total +40$`,
		}},
		{"--total below the floors", []string{"--registry", shippedRegistry, "--total", "20", export}, []string{
			`(?m)^fcm +8 +512 +4$`, `(?m)^total +20$`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, append([]string{"inventory"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(stdout) {
					t.Errorf("output lacks %s:\n%s", w, stdout)
				}
			}
			assertNoEndpointPath(t, stdout+stderr)
		})
	}
}

// TestInventoryTopHosts: past --top, the remaining unknown hosts are summed as others.
func TestInventoryTopHosts(t *testing.T) {
	export := filepath.Join(t.TempDir(), "subs.txt")
	var lines []string
	for i, n := range []int{5, 3, 3, 1, 1} {
		for range n {
			lines = append(lines, fmt.Sprintf("https://h%d.example/SECRET", i))
		}
	}
	if err := os.WriteFile(export, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "inventory", "--registry", shippedRegistry, "--top", "2", export)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "unknown hosts (delivered through fallback): 5 hosts, 13 subscriptions\n" +
		fmt.Sprintf("  %-40s %8d\n", "h0.example", 5) +
		fmt.Sprintf("  %-40s %8d\n", "h1.example", 3) +
		fmt.Sprintf("  %-40s %8d\n", "others (3 hosts)", 5)
	if !strings.Contains(stdout, want) {
		t.Errorf("output lacks\n%s\ngot:\n%s", want, stdout)
	}
	assertNoEndpointPath(t, stdout+stderr)
}

func TestInventoryRefuses(t *testing.T) {
	dir := t.TempDir()
	badReg := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badReg, []byte("version: 1\nbudget: {total_in_flight: 0}\nproviders:\n  - id: fallback\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no file", []string{"inventory", "--registry", shippedRegistry}, 2, "usage"},
		{"two files", []string{"inventory", "--registry", shippedRegistry, "a", "b"}, 2, "usage"},
		{"missing file", []string{"inventory", "--registry", shippedRegistry, filepath.Join(dir, "none.txt")}, 2, "none.txt"},
		{"negative total", []string{"inventory", "--registry", shippedRegistry, "--total", "-1", "testdata/subscriptions.txt"}, 2, "usage"},
		{"bad registry", []string{"inventory", "--registry", badReg, "testdata/subscriptions.txt"}, 1, badReg + ":2: budget.total_in_flight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d mentioning %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
}
