package telemetry

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Log formats NewLogger accepts.
const (
	LogJSON = "json"
	LogText = "text"
)

// NewLogger returns a logger writing to w in format (LogJSON or LogText) at level and above.
// Durations print as Go writes them ("1.5s"), not as nanoseconds. An unknown format is an
// error naming it.
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	o := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText}
	switch format {
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, o)), nil
	case LogText:
		return slog.New(slog.NewTextHandler(w, o)), nil
	}
	return nil, fmt.Errorf("telemetry: log format %q: want %q or %q", format, LogJSON, LogText)
}

// durationsAsText writes a time.Duration attribute as its String form.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// RedisLogger adapts l to go-redis's logger (redis.SetLogger takes any value with this Printf):
// go-redis's own lines, such as a pool's dial failures, become warnings with component=redis
// instead of plain lines on stderr.
func RedisLogger(l *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	if l == nil {
		l = slog.Default()
	}
	return redisLogger{l.With("component", "redis")}
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	r.l.Log(ctx, slog.LevelWarn, strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// EndpointHashLen is the length of EndpointHash's result.
const EndpointHashLen = 16

// EndpointHash is a keyed hash of endpoint for logs: HMAC-SHA256 under key, the first
// EndpointHashLen hex digits. Lines about one endpoint share it, so deliveries to one
// subscription can be followed, while the endpoint itself (a credential: whoever holds it can
// push to the subscriber) stays out of the logs. key is a secret of the deployment: without it
// nobody can test a guessed endpoint against a logged hash.
func EndpointHash(key []byte, endpoint string) string {
	mac := hmac.New(sha256.New, key)
	_, _ = io.WriteString(mac, endpoint)
	return hex.EncodeToString(mac.Sum(nil))[:EndpointHashLen]
}
