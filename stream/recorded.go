package stream

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Recorded reports whether the ledger of shard holds r's record as Finish writes it: the same
// job id, provider, code, attempt, latency and time, which another attempt's record does not
// share (its own send has its own latency and its own answer time). It reads the records
// written at or after since (their entry ids' time, Redis's clock), newest first, at most limit
// of them (limit <= 0: no limit); cut says the limit stopped it before since was reached.
//
// It tells a Finish whose first try wrote the record, and whose reply was lost (a Redis stall
// past the client's read timeout, after which the client or the caller tried again and found
// the entry gone), from one that came after another consumer ended the job: only the second
// may mean the push went out twice.
func (s *Store) Recorded(ctx context.Context, shard int, r Result, since time.Time, limit int) (found, cut bool, err error) {
	lo := strconv.FormatInt(max(since.UnixMilli(), 0), 10) + "-0"
	want := map[string]string{
		"id": r.ID, "provider": r.Provider, "code": r.Code, "attempt": strconv.Itoa(r.Attempt),
		"latency_ms": strconv.FormatInt(r.Latency.Milliseconds(), 10), "at": strconv.FormatInt(ms(r.At), 10),
	}
	cut, err = s.scanRange(ctx, s.Keys(shard).Results, lo, "+", true, limit, func(m redis.XMessage) bool {
		for k, v := range want {
			if str(m.Values[k]) != v {
				return true
			}
		}
		found = true
		return false
	})
	if found {
		cut = false
	}
	return found, cut, err
}
