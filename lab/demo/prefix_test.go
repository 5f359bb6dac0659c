//go:build unix

package demo

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
)

// TestDemoOnAGivenRedisPrintsItsPrefixAndTheCleanup: with --redis the demo says which prefix it
// wrote under, and the command it prints removes every key of that prefix and no other.
func TestDemoOnAGivenRedisPrintsItsPrefixAndTheCleanup(t *testing.T) {
	t.Parallel() // each demo has its own Redis (or prefix), pushsim and worker, and mostly waits
	if testing.Short() {
		t.Skip("runs the demo for several seconds")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("the printed cleanup runs redis-cli, which is not on PATH: %v", err)
	}
	srv := redistest.Start(t)
	c := srv.Client(t)
	if err := c.Set(context.Background(), "wp:shards", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	out := runDemo(t, Options{RedisURL: srv.URL(), Duration: 2 * time.Second, Rate: 20, Report: filepath.Join(t.TempDir(), "r.html"), Payload: "x"})
	m := regexp.MustCompile(`(?m)^prefix:  (wpdemo\d+) \(every key of this run starts with wpdemo\d+:; a worker finishes its jobs with --prefix wpdemo\d+\)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo did not print its prefix:\n%s", out)
	}
	prefix := m[1]
	_, cleanup, ok := strings.Cut(out, "\ncleanup: ")
	cleanup, _, _ = strings.Cut(cleanup, "\n")
	want := "redis-cli -u '" + srv.URL() + "' --scan --pattern '" + prefix + ":*' | xargs -r redis-cli -u '" + srv.URL() + "' unlink"
	if !ok || cleanup != want {
		t.Fatalf("cleanup line %q, want %q", cleanup, want)
	}
	if n := len(c.Keys(context.Background(), prefix+":*").Val()); n == 0 {
		t.Fatal("the demo left no key of its prefix to clean up")
	}
	if b, err := exec.Command("sh", "-c", cleanup).CombinedOutput(); err != nil {
		t.Fatalf("the printed cleanup failed: %v\n%s", err, b)
	}
	if keys := c.Keys(context.Background(), prefix+":*").Val(); len(keys) != 0 {
		t.Errorf("after the cleanup %d keys of %s remain: %v", len(keys), prefix, keys)
	}
	if c.Exists(context.Background(), "wp:shards").Val() != 1 {
		t.Error("the cleanup removed a key of another prefix")
	}
}
