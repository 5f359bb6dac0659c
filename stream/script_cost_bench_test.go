package stream

import (
	"context"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// BenchmarkScriptParts measures what the parts of the record path cost Redis's CPU, one call at
// a time: each part runs alone in a script with the Lua libraries finish.lua runs in front of
// it. "call" is the floor of such a script (the round trip, EVALSHA and the libraries'
// definitions) and "bare call" the same without the libraries; the other parts are read against
// "call".
func BenchmarkScriptParts(b *testing.B) {
	lib := ownedLua + windowLua + campLua
	parts := []struct {
		name, lib, body string
	}{
		{name: "bare call", body: "return 1"},
		{name: "call", lib: lib, body: "return 1"},
		{name: "window seen", lib: lib, body: "return w_seen(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])) and 1 or 0"},
		{name: "window add", lib: lib, body: "w_add(KEYS[1], {ARGV[1]}, tonumber(ARGV[2]), tonumber(ARGV[3])) return 1"},
		{name: "pending for one", lib: lib, body: "pending_for(KEYS[2], 'g', 'c', {'1-1'}) return 1"},
		{name: "ledger record", lib: lib, body: "redis.call('XADD', KEYS[2], '*', 'id', ARGV[1], 'provider', 'fcm', 'code', 'ACCEPTED', " +
			"'status', '201', 'detail', '', 'attempt', '1', 'latency_ms', '3', 'at', ARGV[2]) return 1"},
	}
	for _, p := range parts {
		b.Run(strings.ReplaceAll(p.name, " ", "-"), func(b *testing.B) {
			c, _ := benchStore(b)
			ctx := context.Background()
			if err := c.XGroupCreateMkStream(ctx, "{b}:s", "g", "0").Err(); err != nil {
				b.Fatal(err)
			}
			sc := redis.NewScript(withLib(p.lib, "#!lua flags=allow-oom\n"+p.body))
			if err := sc.Load(ctx, c).Err(); err != nil {
				b.Fatal(err)
			}
			keys := []string{"{b}:w", "{b}:s"}
			// Fields as the window's are: the first bytes of a SHA-256, here of the call's number.
			field := func(i int) string {
				h := sha256.Sum256([]byte(strconv.Itoa(i)))
				return string(h[:10])
			}
			// Redis's own time: a window's keys written at a moment long past expire at once.
			now, err := c.Time(ctx).Result()
			if err != nil {
				b.Fatal(err)
			}
			nowMs := int(now.UnixMilli())
			before := redisCPU(b, c)
			b.ResetTimer()
			for i := range b.N {
				if err := sc.EvalSha(ctx, c, keys, field(i), nowMs+i, 3_600_000).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((redisCPU(b, c)-before).Nanoseconds())/1e3/float64(b.N), "redis-µs/call")
			if p.name == "window add" && b.N > 1000 {
				if n, err := c.Keys(ctx, "{b}:w:s*").Result(); err != nil || len(n) < 2 {
					b.Fatalf("the window wrote %d keys after %d adds (%v)", len(n), b.N, err)
				}
			}
		})
	}
}
