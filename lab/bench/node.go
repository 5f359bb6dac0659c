package bench

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// nodeFiles are the Node contender: a plain stream consumer around web-push, and the exact
// package versions it runs with (package-lock.json pins web-push's own dependencies too).
//
//go:embed benchnode/consumer.js benchnode/package.json benchnode/package-lock.json
var nodeFiles embed.FS

// node runs Node's web-push as a contender, when node and npm are on the PATH. npm installs
// its packages once into a cache folder (npm ci, from the lock file); a changed package.json or
// lock file installs them again.
func (env *runEnv) node(ctx context.Context) (Row, error) {
	row := Row{Name: contenderNode}
	node, err := exec.LookPath("node")
	if err != nil {
		row.Skipped = "no node on PATH"
		return row, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		row.Skipped = "node is on PATH but npm is not"
		return row, nil
	}
	dir := env.o.NodeDir
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir = filepath.Join(cache, "webpush-gateway", "bench-node")
	}
	if why := installNode(ctx, npm, dir, env); why != "" {
		row.Skipped = why
		return row, nil
	}
	return env.plainConsumer(ctx, contenderNode, []string{node, filepath.Join(dir, "consumer.js")})
}

// installNode writes the consumer into dir and runs npm install there unless the same
// package.json is installed already. It returns why Node cannot run, or "".
func installNode(ctx context.Context, npm, dir string, env *runEnv) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "cannot create " + dir + ": " + err.Error()
	}
	pkg, _ := nodeFiles.ReadFile("benchnode/package.json")
	lock, _ := nodeFiles.ReadFile("benchnode/package-lock.json")
	js, _ := nodeFiles.ReadFile("benchnode/consumer.js")
	if err := os.WriteFile(filepath.Join(dir, "consumer.js"), js, 0o644); err != nil {
		return err.Error()
	}
	installed := append(append([]byte(nil), pkg...), lock...)
	stamp := filepath.Join(dir, "node_modules", ".bench-installed")
	if have, err := os.ReadFile(stamp); err == nil && bytes.Equal(have, installed) {
		return ""
	}
	for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err.Error()
		}
	}
	fmt.Fprintf(env.out, "node:     installing web-push and redis from npm into %s\n", dir)
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ictx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "npm install failed: " + lastLines(strings.TrimSpace(string(out)), 2)
	}
	if err := os.WriteFile(stamp, installed, 0o644); err != nil {
		return err.Error()
	}
	return ""
}

// nodeVersion is `node --version`, or "" when node is missing.
func nodeVersion() string {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
