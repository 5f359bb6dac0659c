package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// WorkerPackage is the package of the product binary, relative to the module root.
const WorkerPackage = "./cmd/gateway-worker"

// Compile builds the worker as the image wants it: statically linked (CGO_ENABLED=0), without
// build paths (-trimpath) and without the symbol table and DWARF (-s -w; stack traces still
// name functions), for linux/goarch (the machine's own when empty), into out. moduleDir is the
// repository root.
func Compile(ctx context.Context, moduleDir, out, goarch string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, WorkerPackage)
	cmd.Dir = moduleDir
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
