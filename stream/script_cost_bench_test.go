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
// a time: each part runs alone in a script with the shared Lua libraries in front, as finish.lua
// and to_lane.lua run them. "call" is the floor of such a script (the round trip, EVALSHA and the
// libraries' definitions); the other parts are read against it. "window add, no sweep" is the
// window's write with its sweep turned off, to show what the sweep costs.
func BenchmarkScriptParts(b *testing.B) {
	parts := []struct {
		name, body string
		noSweep    bool
	}{
		{name: "call", body: "return 1"},
		{name: "window state", body: "w_state(KEYS[1]) return 1"},
		{name: "window seen", body: "return w_seen(KEYS[1], w_state(KEYS[1]), ARGV[1], w_since(3600)) and 1 or 0"},
		{name: "window add", body: "w_add(KEYS[1], w_state(KEYS[1]), {ARGV[1]}, {ARGV[2]}, ARGV[3]) return 1"},
		{name: "window add, no sweep", body: "w_add(KEYS[1], w_state(KEYS[1]), {ARGV[1]}, {ARGV[2]}, ARGV[3]) return 1", noSweep: true},
		{name: "pending for one", body: "pending_for(KEYS[2], 'g', 'c', {'1-1'}) return 1"},
		{name: "ledger record", body: "redis.call('XADD', KEYS[2], '*', 'id', ARGV[1], 'provider', 'fcm', 'code', 'ACCEPTED', " +
			"'status', '201', 'detail', '', 'attempt', '1', 'latency_ms', '3', 'at', ARGV[2]) return 1"},
	}
	for _, p := range parts {
		b.Run(strings.ReplaceAll(p.name, " ", "-"), func(b *testing.B) {
			c, _ := benchStore(b)
			ctx := context.Background()
			if err := c.XGroupCreateMkStream(ctx, "{b}:s", "g", "0").Err(); err != nil {
				b.Fatal(err)
			}
			window := windowLua
			if p.noSweep {
				window = strings.Replace(window, "local W_SWEEP = 8", "local W_SWEEP = 1e9", 1)
				if window == windowLua {
					b.Fatal("window.lua no longer sets W_SWEEP = 8")
				}
			}
			sc := redis.NewScript(withLib(ownedLua+window, "#!lua flags=allow-oom\n"+p.body))
			if err := sc.Load(ctx, c).Err(); err != nil {
				b.Fatal(err)
			}
			keys := []string{"{b}:w", "{b}:s"}
			// Fields as the window's are: the first bytes of a SHA-256, here of the call's number.
			field := func(i int) string {
				h := sha256.Sum256([]byte(strconv.Itoa(i)))
				return string(h[:10])
			}
			const now = 1_700_000_000
			before := redisCPU(b, c)
			b.ResetTimer()
			for i := range b.N {
				if err := sc.EvalSha(ctx, c, keys, field(i), now+i/1000, 3_600_000).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((redisCPU(b, c)-before).Nanoseconds())/1e3/float64(b.N), "redis-µs/call")
			if p.name == "window add" && b.N > 1000 {
				if n, err := c.HGet(ctx, "{b}:w", "n").Int(); err != nil || n < b.N/2 {
					b.Fatalf("the window holds about %d fields after %d adds (%v)", n, b.N, err)
				}
			}
		})
	}
}
