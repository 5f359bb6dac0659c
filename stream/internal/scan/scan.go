// Package scan reads Redis page by page for the packages of stream: the entries of a stream
// between two ids (Range), the keys that match a pattern on every master (Keys), and the little
// they need to tell of what they read (an entry id's time, a stream without its group). It
// knows nothing of the gateway's keys.
package scan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Range calls fn with the entries of stream between ids lo and hi, newest first when reverse,
// a thousand a round trip, until fn returns false or limit entries were read (limit <= 0: no
// limit). cut is true when the limit stopped it with entries left.
func Range(ctx context.Context, c redis.Cmdable, stream, lo, hi string, reverse bool, limit int, fn func(redis.XMessage) bool) (cut bool, err error) {
	const page = 1000
	read := 0
	for {
		n := int64(page)
		if limit > 0 {
			n = int64(min(page, limit-read))
		}
		var msgs []redis.XMessage
		if reverse {
			msgs, err = c.XRevRangeN(ctx, stream, hi, lo, n).Result()
		} else {
			msgs, err = c.XRangeN(ctx, stream, lo, hi, n).Result()
		}
		if err != nil {
			return false, fmt.Errorf("stream: read %s: %w", stream, err)
		}
		for _, m := range msgs {
			read++
			if !fn(m) {
				return false, nil
			}
		}
		if int64(len(msgs)) < n {
			return false, nil
		}
		last := msgs[len(msgs)-1].ID
		if reverse {
			hi = "(" + last
		} else {
			lo = "(" + last
		}
		if limit > 0 && read >= limit {
			// Cut only if something is left beyond the last entry read.
			var more []redis.XMessage
			if reverse {
				more, err = c.XRevRangeN(ctx, stream, hi, lo, 1).Result()
			} else {
				more, err = c.XRangeN(ctx, stream, lo, hi, 1).Result()
			}
			if err != nil {
				return false, fmt.Errorf("stream: read %s: %w", stream, err)
			}
			return len(more) > 0, nil
		}
	}
}

// Keys runs SCAN MATCH pattern on every master of c (one node unless c is a cluster client).
func Keys(ctx context.Context, c redis.UniversalClient, pattern string) ([]string, error) {
	scan := func(ctx context.Context, c redis.Cmdable) ([]string, error) {
		var out []string
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return nil, err
			}
			out = append(out, keys...)
			if next == 0 {
				return out, nil
			}
			cursor = next
		}
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		keys, err := scan(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("stream: scan: %w", err)
		}
		return keys, nil
	}
	var (
		mu  sync.Mutex // ForEachMaster runs fn concurrently
		all []string
	)
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		keys, err := scan(ctx, c)
		mu.Lock()
		all = append(all, keys...)
		mu.Unlock()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("stream: scan: %w", err)
	}
	return all, nil
}

// GlobEscape is s with the characters SCAN's patterns give a meaning escaped, so that a
// pattern can start with a key prefix as it is.
func GlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// NoGroup says err is Redis's answer about a stream that has no such consumer group, or no
// answer at all: nothing is pending there.
func NoGroup(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "NOGROUP") || errors.Is(err, redis.Nil))
}

// EntryTime is when a stream entry was added: the milliseconds part of its id (zero for an id
// without them).
func EntryTime(id string) time.Time {
	msPart, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(msPart, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// CompareIDs orders stream entry ids ("ms-seq") as Redis does: -1, 0 or 1 as a is before,
// the same as or after b.
func CompareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	for _, p := range [][2]string{{am, bm}, {as, bs}} {
		x, _ := strconv.ParseUint(p[0], 10, 64)
		y, _ := strconv.ParseUint(p[1], 10, 64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
	}
	return 0
}
