package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryBoundsRefusedByCheckAndRun: a registry past a bound (a max_in_flight a channel
// could not be sized to, more providers than Redis has connections for) is refused by check and
// by run alike, with the file, line and field, before run connects to anything.
func TestRegistryBoundsRefusedByCheckAndRun(t *testing.T) {
	dir := t.TempDir()
	many := []string{"version: 1", "providers:", "  - id: fallback"}
	for i := range 65 {
		many = append(many, fmt.Sprintf("  - {id: p%d, hosts: [p%d.example]}", i, i))
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"max_in_flight", "version: 1\nproviders:\n  - id: fallback\n    max_in_flight: 2000000000\n",
			":4: providers[0].max_in_flight: at most 10000 per replica"},
		{"providers", strings.Join(many, "\n") + "\n", ":67: providers: 66 entries; at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, stderr := run(t, "check", file)
			if code != 1 || !strings.Contains(stderr, file+tc.want) {
				t.Errorf("check: exit %d, stderr %q; want 1 and %q", code, stderr, file+tc.want)
			}
			code, _, stderr = run(t, "run", "--registry", file, "--redis", "redis://127.0.0.1:1/0",
				"--vapid-key", "testdata/vapid.pem", "--subject", "mailto:ops@example.com")
			if code != 2 || !strings.Contains(stderr, file+tc.want) {
				t.Errorf("run: exit %d, stderr %q; want 2 and %q", code, stderr, file+tc.want)
			}
		})
	}
}
