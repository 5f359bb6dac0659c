package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
)

// TestShardCountMismatchIsRefused: once a prefix is used with one shard count, enqueue, run
// and audit with another count refuse at once, naming both counts, and write nothing (jobs
// written to shards no worker reads would wait there unseen, and audit would call them lost).
func TestShardCountMismatchIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	if err := os.WriteFile(jobs, []byte(`{"id":"a"}`+"\n"+`{"id":"b"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "enqueue", "--redis", srv.URL(), jobs); code != 0 {
		t.Fatalf("enqueue with the default shard count: exit %d: %s", code, stderr)
	}
	// (run logs JSON, which escapes the quotes around the prefix: the check leaves them out.)
	const want = `is used with 1 shards (recorded in wp:shards) but this process was given 4; use --shards 1`
	if code, _, stderr := run(t, "enqueue", "--redis", srv.URL(), "--shards", "4", jobs); code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("enqueue --shards 4: exit %d, stderr %q; want a refusal with %q", code, stderr, want)
	}
	c := srv.Client(t)
	for s := 1; s < 4; s++ {
		if n := c.XLen(context.Background(), "wp:{"+string(rune('0'+s))+"}:in").Val(); n != 0 {
			t.Errorf("shard %d holds %d entries after the refusal", s, n)
		}
	}
	key := filepath.Join(dir, "vapid.pem")
	if code, _, stderr := run(t, "keygen", "--out", key); code != 0 {
		t.Fatal(stderr)
	}
	began := time.Now()
	code, _, stderr := run(t, "run", "--http", "", "--redis", srv.URL(), "--shards", "4", "--vapid-key", key,
		"--subject", "mailto:ops@example.com", "--startup-timeout", "1m")
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("run --shards 4: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("run took %v to refuse; a mismatch is refused at once, not retried until the startup timeout", took)
	}
	// The same with a registry file, whose watcher must end with the refused worker too.
	registry := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(registry, webpushgateway.DefaultRegistry, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := make(chan string, 1)
	go func() {
		code, _, stderr := run(t, "run", "--http", "", "--redis", srv.URL(), "--shards", "4", "--vapid-key", key,
			"--subject", "mailto:ops@example.com", "--registry", registry, "--startup-timeout", "1m")
		if code != 1 || !strings.Contains(stderr, want) {
			refused <- fmt.Sprintf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
			return
		}
		refused <- ""
	}()
	select {
	case problem := <-refused:
		if problem != "" {
			t.Errorf("run --shards 4 --registry FILE: %s", problem)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run --shards 4 --registry FILE did not return within 20s of refusing to start")
	}
	ids := filepath.Join(dir, "ids.txt")
	if err := os.WriteFile(ids, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "audit", "--redis", srv.URL(), "--shards", "4", "--ids", ids); code == 0 || !strings.Contains(stderr, want) {
		t.Errorf("audit --shards 4: exit %d, stderr %q; want a refusal with %q", code, stderr, want)
	}
}
