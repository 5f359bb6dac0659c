package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestStartKillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx := context.Background()
	c := s.Client(t)
	if got := s.URL(); got != fmt.Sprintf("redis://%s/0", s.Addr()) || !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("URL = %q, Addr = %q", got, s.Addr())
	}
	cfg := c.ConfigGet(ctx, "*").Val()
	for k, want := range map[string]string{"appendonly": "yes", "appendfsync": "always", "save": "", "dir": s.Dir()} {
		if cfg[k] != want {
			t.Errorf("config %s = %q, want %q", k, cfg[k], want)
		}
	}
	if !strings.HasPrefix(s.Dir(), os.TempDir()) {
		t.Errorf("dir %q is not under the temp dir", s.Dir())
	}
	for i := range 100 {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"i", i}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Restart()
	if n := c.XLen(ctx, "s").Val(); n != 100 {
		t.Errorf("after kill -9 and restart XLEN = %d, want 100", n)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "appendonlydir")); err != nil {
		t.Errorf("no AOF directory: %v", err)
	}
	// Restart of a running server kills it first.
	s.Restart()
	if n := c.XLen(ctx, "s").Val(); n != 100 {
		t.Errorf("after a second restart XLEN = %d, want 100", n)
	}
	s.Stop()
	s.Stop() // idempotent
}

func TestCommandStats(t *testing.T) {
	s := Start(t)
	c := s.Client(t)
	ctx := context.Background()
	s.ResetStats(t)
	for range 3 {
		c.Set(ctx, "k", "v", 0)
	}
	c.XGroupCreateMkStream(ctx, "st", "g", "0")
	st := s.CommandStats(t)
	if st["set"] != 3 {
		t.Errorf("set calls = %d, want 3 (stats %v)", st["set"], st)
	}
	if st["xgroup|create"] != 1 {
		t.Errorf("xgroup|create calls = %d, want 1 (stats %v)", st["xgroup|create"], st)
	}
}

func TestParseCommandStats(t *testing.T) {
	got := ParseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=1\r\ncmdstat_xgroup|create:calls=2,usec=1\r\nbogus\r\n")
	if len(got) != 2 || got["evalsha"] != 12 || got["xgroup|create"] != 2 {
		t.Errorf("ParseCommandStats = %v", got)
	}
}

func TestWithConfig(t *testing.T) {
	s := Start(t, WithConfig("maxmemory", "64mb"))
	if got := s.Client(t).ConfigGet(context.Background(), "maxmemory").Val()["maxmemory"]; got != "67108864" {
		t.Errorf("maxmemory = %q", got)
	}
}

// TestStartTellsAnotherServerOnItsPort: a server that answers PING on the port but is not the
// process started is not taken for it (another test's server can bind a port found free first).
func TestStartTellsAnotherServerOnItsPort(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.mu.Lock()
	pid, done := s.cmd.Process.Pid, s.done
	s.mu.Unlock()
	if err := s.waitReady(done, pid); err != nil {
		t.Fatalf("the server started: %v", err)
	}
	err := s.waitReady(done, pid+1)
	if err == nil || !strings.Contains(err.Error(), "not by the redis-server started") {
		t.Fatalf("another process's server on the port: %v, want it refused", err)
	}
}
