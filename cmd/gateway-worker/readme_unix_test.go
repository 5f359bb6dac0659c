//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/doctest"
)

// readmeSnippet is the first ```sh block after the line heading in README.md.
func readmeSnippet(t *testing.T, heading string) string {
	t.Helper()
	return doctest.MarkdownBlock(t, "../../README.md", heading, "sh")
}

// TestREADMESendSnippetRunsAsPasted runs the README's "try send against the simulator" snippet
// as a user pastes it, twice in the same directory (the second paste finds the key file and an
// older pushsim.out), with the binaries `make build` makes: each paste must deliver.
func TestREADMESendSnippetRunsAsPasted(t *testing.T) {
	t.Parallel() // it mostly waits on the build and the processes it starts
	if testing.Short() {
		t.Skip("builds gateway-worker and pushsim")
	}
	for _, tool := range []string{"bash", "curl", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README snippet needs %s on PATH: %v", tool, err)
		}
	}
	snippet := readmeSnippet(t, "### Trying `send` against the simulator")
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin") + string(filepath.Separator)
	build := exec.Command("go", "build", "-o", bin, ".", "../pushsim")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GATEWAY_") {
			env = append(env, kv)
		}
	}
	for paste := 1; paste <= 2; paste++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", snippet)
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a pushsim it leaves is stopped below
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cancel()
		if err != nil || !strings.Contains(out.String(), `"code":"ACCEPTED","status":201,"provider":"apple"`) {
			t.Fatalf("paste %d: %v\n%s", paste, err, out.String())
		}
	}
}
