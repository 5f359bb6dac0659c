// Package promtool finds Prometheus's promtool for tests and runs `promtool check metrics` on a
// scrape: the linter Prometheus itself applies, rather than a copy of its rules.
package promtool

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Path is promtool on the PATH or where scripts/install-deps.sh puts it (bin/promtool at the
// repository root). It fails the test when it is in neither.
func Path(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("promtool: cannot find the repository root")
	}
	local := filepath.Join(filepath.Dir(file), "..", "..", "bin", "promtool")
	if fi, err := os.Stat(local); err == nil && fi.Mode()&0o111 != 0 {
		return local
	}
	t.Fatalf("promtool is not on the PATH nor at %s: run `make deps` (scripts/install-deps.sh extracts it from Debian's prometheus package)", filepath.Clean(local))
	return ""
}

// CheckMetrics fails the test unless `promtool check metrics` passes the scrape text.
func CheckMetrics(t testing.TB, text []byte) {
	t.Helper()
	cmd := exec.Command(Path(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
