package stream

import (
	_ "embed"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// window010Lua is release 0.1.0's window.lua, as it shipped: the workers of a rolling upgrade
// from 0.1.0 write with it while this release's read.
//
//go:embed testdata/window_0_1_0.lua
var window010Lua string

// window010AddScript accepts the fields after ARGV[2] as 0.1.0 did, at ARGV[1] (unix s) with
// a TTL of ARGV[2] (ms).
var window010AddScript = redis.NewScript(window010Lua + `
local fields, nows = {}, {}
for i = 3, #ARGV do
  table.insert(fields, ARGV[i])
  table.insert(nows, ARGV[1])
end
w_add(KEYS[1], w_state(KEYS[1]), fields, nows, ARGV[2])
return 1`)

// window010Add accepts ids as a 0.1.0 worker did, at unix second at with a TTL of ttl.
func window010Add(t *testing.T, env *env, base string, at int64, ttl time.Duration, ids ...string) {
	t.Helper()
	args := []any{at, ttl.Milliseconds()}
	for _, id := range ids {
		args = append(args, windowField(id))
	}
	if err := window010AddScript.Run(env.ctx, env.c, []string{base}, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestWindowReadsTheWindowOf010: during a rolling upgrade from 0.1.0, a job a 0.1.0 worker
// accepted within the TTL is found by this release's lookups, whether its bucket of 0.1.0's
// table has been split or not, so a copy enqueued again is acknowledged unsent; one accepted
// longer ago than the TTL, or never, is not found. This release's own keys never collide with
// 0.1.0's.
func TestWindowReadsTheWindowOf010(t *testing.T) {
	env := newEnv(t)
	s := env.store(t, "w1", Options{SentTTL: time.Hour}, "fcm")
	base := s.Keys(0).Window
	nowS := redisMs(t, env) / 1000
	var recent, stale []string
	for b := range 50 {
		ids := windowIDs("old", b, 100)
		window010Add(t, env, base, nowS-60, time.Hour, ids...)
		recent = append(recent, ids...)
	}
	stale = windowIDs("stale", 0, 100)
	window010Add(t, env, base, nowS-3600-5, time.Hour, stale...)
	st, err := env.c.HMGet(env.ctx, base, "L", "p").Result()
	if err != nil || st[0] == nil || st[0] == "0" {
		t.Fatalf("0.1.0's table state %v, %v: want one that has grown (L > 0)", st, err)
	}

	// This release accepts jobs of its own in the same window.
	windowAdd(t, env, base, redisMs(t, env), time.Hour, windowIDs("new", 0, 500)...)

	now := redisMs(t, env)
	if n := countSeen(windowSeen(t, env, base, now, time.Hour, recent...)); n != len(recent) {
		t.Errorf("%d of the %d jobs 0.1.0 accepted a minute ago found, want all", n, len(recent))
	}
	if n := countSeen(windowSeen(t, env, base, now, time.Hour, stale...)); n != 0 {
		t.Errorf("%d of the jobs 0.1.0 accepted over an hour ago found, want none", n)
	}
	if n := countSeen(windowSeen(t, env, base, now, time.Hour, windowIDs("never", 0, 500)...)); n != 0 {
		t.Errorf("%d jobs never accepted found, want none", n)
	}
	if n := countSeen(windowSeen(t, env, base, now, time.Hour, windowIDs("new", 0, 500)...)); n != 500 {
		t.Errorf("%d of this release's 500 jobs found, want all", n)
	}

	// Through the Store: a copy is acknowledged unsent, and a redelivered entry counts as sent.
	if v := copyVerdict(t, env, s, recent[1234]); v != Copy {
		t.Errorf("a copy of a job 0.1.0 accepted: ToLane = %v, want Copy (%v)", v, Copy)
	}
	if sent, err := s.WasSent(env.ctx, 0, recent[4321]); err != nil || !sent {
		t.Errorf("WasSent of a job 0.1.0 accepted = %v, %v; want true", sent, err)
	}
	if v := copyVerdict(t, env, s, stale[7]); v != Moved {
		t.Errorf("a copy of a job 0.1.0 accepted over an hour ago: ToLane = %v, want Moved (%v)", v, Moved)
	}
}
