package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestNewLoggerDurationsAsText(t *testing.T) {
	for _, c := range []struct {
		format string
		want   string
	}{
		{LogJSON, `"took":"1.5s"`},
		{LogText, `took=1.5s`},
	} {
		t.Run(c.format, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := NewLogger(&buf, c.format, slog.LevelInfo)
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("hidden", "took", time.Second)
			l.Info("sent", "took", 1500*time.Millisecond, slog.Group("retry", "after", 250*time.Millisecond))
			out := buf.String()
			if strings.Contains(out, "hidden") {
				t.Errorf("a debug line passed level info:\n%s", out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output lacks %s:\n%s", c.want, out)
			}
			if !strings.Contains(out, "250ms") || strings.Contains(out, "1500000000") {
				t.Errorf("durations not as text:\n%s", out)
			}
		})
	}
}

func TestNewLoggerUnknownFormat(t *testing.T) {
	_, err := NewLogger(&bytes.Buffer{}, "yaml", slog.LevelInfo)
	if err == nil || !strings.Contains(err.Error(), `"yaml"`) {
		t.Fatalf("NewLogger(yaml): %v, want an error naming the format", err)
	}
}

// redisLoggerFits is never called: it compiles only while RedisLogger's result is something
// go-redis's SetLogger takes.
var redisLoggerFits = func() { redis.SetLogger(RedisLogger(nil)) }

func TestRedisLogger(t *testing.T) {
	_ = redisLoggerFits
	var buf bytes.Buffer
	l, err := NewLogger(&buf, LogJSON, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	RedisLogger(l).Printf(context.Background(), "redis: %s:%d: connection pool: failed to dial after %d attempts: %v\n",
		"pool.go", 123, 5, "dial tcp 127.0.0.1:1: connect: connection refused")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %v\n%s", err, buf.String())
	}
	want := map[string]any{
		"level":     "WARN",
		"component": "redis",
		"msg":       "redis: pool.go:123: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %q, want %q", k, line[k], v)
		}
	}
}

func TestEndpointHash(t *testing.T) {
	key := []byte("deployment secret")
	ep := "https://fcm.googleapis.com/fcm/send/abc:APA91b"
	h := EndpointHash(key, ep)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(h) {
		t.Fatalf("EndpointHash = %q, want 16 hex digits", h)
	}
	if EndpointHash(key, ep) != h {
		t.Error("not deterministic")
	}
	if EndpointHash(key, ep+"x") == h {
		t.Error("another endpoint has the same hash")
	}
	if EndpointHash([]byte("other secret"), ep) == h {
		t.Error("another key gives the same hash")
	}
	// The widely published example HMAC-SHA256("key", "The quick brown fox jumps over the lazy
	// dog") = f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8.
	if got := EndpointHash([]byte("key"), "The quick brown fox jumps over the lazy dog"); got != "f7bc83f430538424" {
		t.Errorf("known vector: %s", got)
	}
}
