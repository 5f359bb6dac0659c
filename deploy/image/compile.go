package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ProductModule is the module path of the product, whose root is the repository root. The
// deploy checks and this package are a module of their own below it (deploy/go.mod).
const ProductModule = "github.com/webpush-gateway/webpush-gateway"

// WorkerPackage is the package of the product binary, relative to the repository root.
const WorkerPackage = "./cmd/gateway-worker"

// Compile builds the worker as the image wants it: statically linked (CGO_ENABLED=0), without
// build paths (-trimpath) and without the symbol table and DWARF (-s -w; stack traces still
// name functions), for linux/goarch (the machine's own when empty), into out. repoRoot is the
// repository root, the product module's directory (see RepoRoot).
func Compile(ctx context.Context, repoRoot, out, goarch string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, WorkerPackage)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if goarch != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+goarch)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("image: go build %s: %w\n%s", WorkerPackage, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// RepoRoot is the repository root seen from dir: the nearest directory at or above dir whose
// go.mod declares ProductModule. It finds the root from the repository root itself, from
// deploy/ (whose go.mod is the deploy module's) and from any directory below either.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(data) == ProductModule {
			return dir, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("image: no go.mod of %s at or above the directory", ProductModule)
		}
		dir = parent
	}
}

// modulePath is the path a go.mod's module directive declares ("" when it has none).
func modulePath(gomod []byte) string {
	for line := range strings.Lines(string(gomod)) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || fields[0] != "module" {
			continue
		}
		if p, err := strconv.Unquote(fields[1]); err == nil {
			return p
		}
		return fields[1]
	}
	return ""
}
