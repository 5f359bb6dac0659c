package localredis

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStartServesLoopbackAndStopRemovesEverything(t *testing.T) {
	ctx := context.Background()
	r, err := Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer r.Stop()
	addr, ok := strings.CutPrefix(r.URL(), "redis://")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("URL %q, want redis://127.0.0.1:<port>/0", r.URL())
	}
	opt, err := redis.ParseURL(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on %s: %v", r.URL(), err)
	}
	// No persistence: nothing a later run could find.
	if save, err := c.ConfigGet(ctx, "save").Result(); err != nil || save["save"] != "" {
		t.Errorf("CONFIG GET save = %v (%v), want snapshots off", save, err)
	}
	r.Stop()
	if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
		t.Errorf("its directory %s is still there after Stop (%v)", r.dir, err)
	}
	if conn, err := net.DialTimeout("tcp", strings.TrimSuffix(addr, "/0"), time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
}

func TestStartWithoutRedisServerSaysHowToGetIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Start(context.Background()); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "--redis URL") {
		t.Fatalf("Start with no redis-server on PATH: %v, want ErrNotInstalled", err)
	}
}
