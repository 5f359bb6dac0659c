package stream

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/stream/internal/scan"
)

// The worker's reads of package scan, which stream/inspect shares.

// scanRange is scan.Range on the Store's main client.
func (s *keyspace) scanRange(ctx context.Context, stream, lo, hi string, reverse bool, limit int, fn func(redis.XMessage) bool) (cut bool, err error) {
	return scan.Range(ctx, s.c, stream, lo, hi, reverse, limit, fn)
}

// scanKeys is scan.Keys on the Store's main client: SCAN MATCH on every master.
func (s *keyspace) scanKeys(ctx context.Context, pattern string) ([]string, error) {
	return scan.Keys(ctx, s.c, pattern)
}

func globEscape(s string) string { return scan.GlobEscape(s) }

func isNoGroup(err error) bool { return scan.NoGroup(err) }

// entryTime is when a stream entry was added: the milliseconds part of its id.
func entryTime(id string) time.Time { return scan.EntryTime(id) }

// str is a field of an entry read from Redis as a string ("" when it is none).
func str(v any) string {
	s, _ := v.(string)
	return s
}
