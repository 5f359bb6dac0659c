package workerproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// productModule is the module whose ./cmd/gateway-worker is built: the main module of the
// product's tests, and a replaced dependency of the lab's.
const productModule = "github.com/webpush-gateway/webpush-gateway"

// stampVar is the variable `make build` sets to VERSION with -X (the Makefile's BUILDINFO).
const stampVar = productModule + "/internal/product/buildinfo.stamp"

// Option changes how the binary is built.
type Option func(*options)

type options struct {
	version string
}

// Version stamps the build with v, as `make build VERSION=v` does: `gateway-worker version`,
// `status` and webpush_build_info say it. Without it the binary reports what an unstamped
// build does.
func Version(v string) Option { return func(o *options) { o.version = v } }

// bin is the binary Main built; empty outside Main.
var bin string

// Main builds the worker into a temporary directory, runs the tests and removes the build. Its
// result is m.Run's, or 1 (after printing why) when the build failed; TestMain passes it to
// os.Exit.
func Main(m *testing.M, opts ...Option) int {
	dir, err := os.MkdirTemp("", "workerproc-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "gateway-worker")
	if err := Build(path, opts...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin = path
	defer func() { bin = "" }()
	return m.Run()
}

// Build compiles ./cmd/gateway-worker of the product module into path.
func Build(path string, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	root, err := moduleDir()
	if err != nil {
		return err
	}
	args := []string{"build"}
	if o.version != "" {
		args = append(args, "-ldflags", "-X "+stampVar+"="+o.version)
	}
	args = append(args, "-o", path, "./cmd/gateway-worker")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, out)
	}
	return nil
}

// moduleDir is the product module's directory as the go command of the current directory's
// module sees it, so that the lab's tests, in a module of their own, build the same worker.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", productModule).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("go list -m %s: %v\n%s", productModule, err, stderr)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: no directory", productModule)
	}
	return dir, nil
}

// Binary is the path of the binary Main built. It panics outside Main: a test binary that runs
// workers calls Main from its TestMain.
func Binary() string {
	if bin == "" {
		panic("workerproc: no binary built: call workerproc.Main from TestMain")
	}
	return bin
}

// Command is a command of the built binary with args, for a one-off run (enqueue, audit,
// status) whose output the caller collects.
func Command(args ...string) *exec.Cmd {
	return exec.Command(Binary(), args...)
}
