package stream

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// windowOps runs window.lua's functions on their own, at a time the test gives: add fields
// accepted at ARGV[1] (ms) with a TTL of ARGV[2] (ms), and say which fields the window holds
// at ARGV[1]. The fields follow. So the tests step time instead of waiting for it.
var (
	windowArgsLua = `
local function fields_from(first)
  local fields = {}
  for i = first, #ARGV do
    table.insert(fields, ARGV[i])
  end
  return fields
end
`
	windowAddScript = redis.NewScript(windowLua + windowArgsLua + `
w_add(KEYS[1], fields_from(3), tonumber(ARGV[1]), tonumber(ARGV[2]))
return 1`)
	windowSeenScript = redis.NewScript(windowLua + windowArgsLua + `
local out = {}
for i, v in ipairs(w_seen_all(KEYS[1], fields_from(3), tonumber(ARGV[1]), tonumber(ARGV[2]))) do
  out[i] = v and 1 or 0
end
return out`)
)

// windowAdd puts ids in the window at base as accepted at nowMs with a TTL of ttl.
func windowAdd(t *testing.T, env *env, base string, nowMs int64, ttl time.Duration, ids ...string) {
	t.Helper()
	args := []any{nowMs, ttl.Milliseconds()}
	for _, id := range ids {
		args = append(args, windowField(id))
	}
	if err := windowAddScript.Run(env.ctx, env.c, []string{base}, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// windowSeen is, for each of ids, whether the window at base holds it at nowMs.
func windowSeen(t *testing.T, env *env, base string, nowMs int64, ttl time.Duration, ids ...string) []bool {
	t.Helper()
	args := []any{nowMs, ttl.Milliseconds()}
	for _, id := range ids {
		args = append(args, windowField(id))
	}
	v, err := windowSeenScript.Run(env.ctx, env.c, []string{base}, args...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(v))
	for i, x := range v {
		out[i] = x == 1
	}
	return out
}

// windowIDs names the n jobs of batch b: prefix-b-0 to prefix-b-(n-1).
func windowIDs(prefix string, b, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d-%d", prefix, b, i)
	}
	return ids
}

// redisMs is Redis's clock, unix ms.
func redisMs(t *testing.T, env *env) int64 {
	t.Helper()
	now, err := env.c.Time(env.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMilli()
}

// countSeen is how many of seen are true.
func countSeen(seen []bool) int {
	n := 0
	for _, s := range seen {
		if s {
			n++
		}
	}
	return n
}

// TestWindowHoldsAJobForAtLeastTheTTL: a job accepted at t is found at every moment up to t +
// TTL, whatever the slice it fell in, and none is found once twice the TTL has passed; jobs
// never accepted are never found.
func TestWindowHoldsAJobForAtLeastTheTTL(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttl = 100 * time.Second
	ttlMs := ttl.Milliseconds()
	// A moment in the future, so that the keys it writes do not expire during the test; just
	// before a slice ends, and just after one began.
	start := (redisMs(t, env)/ttlMs + 10) * ttlMs
	for i, at := range []int64{start - 1, start, start + ttlMs/2} {
		ids := windowIDs("acc", i, 500)
		windowAdd(t, env, base, at, ttl, ids...)
		for _, later := range []int64{at, at + 1, at + ttlMs/2, at + ttlMs - 1} {
			if n := countSeen(windowSeen(t, env, base, later, ttl, ids...)); n != len(ids) {
				t.Errorf("jobs accepted at %d, looked for at +%d ms: %d of %d found", at, later-at, n, len(ids))
			}
		}
		if n := countSeen(windowSeen(t, env, base, at+2*ttlMs, ttl, ids...)); n != 0 {
			t.Errorf("jobs accepted at %d, looked for two TTLs later: %d found, want 0", at, n)
		}
		if n := countSeen(windowSeen(t, env, base, at, ttl, windowIDs("never", i, 500)...)); n != 0 {
			t.Errorf("%d jobs never accepted found in the window", n)
		}
	}
}

// TestWindowKeysExpireWholeAtTheirSlicesEnd: every key of a slice expires at the moment its
// slice's second successor begins, on Redis's clock, so it outlives every job in it by the TTL.
func TestWindowKeysExpireWholeAtTheirSlicesEnd(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttl = 100 * time.Second
	ttlMs := ttl.Milliseconds()
	slice := redisMs(t, env)/ttlMs + 1
	windowAdd(t, env, base, slice*ttlMs+ttlMs-1, ttl, windowIDs("exp", 0, 300)...)
	keys, err := env.c.Keys(env.ctx, base+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 2 {
		t.Fatalf("the window wrote keys %v, want a slice key and its buckets", keys)
	}
	for _, k := range keys {
		at, err := env.c.Do(env.ctx, "PEXPIRETIME", k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		if want := (slice + 2) * ttlMs; at != want {
			t.Errorf("%s expires at %d, want %d (the end of the slice after next)", k, at, want)
		}
	}
}

// TestWindowFanOutFollowsTheSliceBefore: a slice spreads its jobs over as many buckets as the
// slice before needed, so at a steady rate every bucket stays a listpack, and a lookup reads one
// small hash a slice.
func TestWindowFanOutFollowsTheSliceBefore(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttl = 100 * time.Second
	ttlMs := ttl.Milliseconds()
	first := redisMs(t, env)/ttlMs + 1
	const perSlice = 20_000
	for s := first; s < first+2; s++ {
		for b := range perSlice / 500 {
			windowAdd(t, env, base, s*ttlMs+int64(b), ttl, windowIDs(strconv.FormatInt(s, 10), b, 500)...)
		}
	}
	second := base + ":s" + strconv.FormatInt(first+1, 10)
	f, err := env.c.HGet(env.ctx, second, "f").Int()
	if err != nil {
		t.Fatal(err)
	}
	if f*64 < perSlice || f > 2*perSlice/64 {
		t.Errorf("a slice after one of %d jobs has a fan-out of %d, want about %d/64", perSlice, f, perSlice)
	}
	if n, err := env.c.HGet(env.ctx, second, "n").Int(); err != nil || n != perSlice {
		t.Errorf("the slice counts %d jobs (%v), want %d", n, err, perSlice)
	}
	for i := range f {
		bucket := second + ":" + strconv.Itoa(i)
		if enc := env.c.ObjectEncoding(env.ctx, bucket).Val(); enc != "listpack" {
			t.Errorf("bucket %s is a %q, want a listpack", bucket, enc)
			break
		}
	}
	// What the slice before wrote is still found, one bucket a slice.
	ids := windowIDs(strconv.FormatInt(first, 10), 3, 500)
	if n := countSeen(windowSeen(t, env, base, (first+1)*ttlMs+5, ttl, ids...)); n != len(ids) {
		t.Errorf("jobs of the slice before: %d of %d found", n, len(ids))
	}
}

// TestWindowForgetsAfterTwiceTheTTLOnRedisClock: through the Store, with a short TTL, an
// accepted job is found for at least its TTL and gone within twice the TTL of Redis's clock,
// its keys expired by Redis itself.
func TestWindowForgetsAfterTwiceTheTTLOnRedisClock(t *testing.T) {
	env := newEnv(t)
	const ttl = time.Second
	s := env.store(t, "w1", Options{SentTTL: ttl}, "fcm")
	e := env.laneEntry(t, s, "fcm", "short-1")
	began := time.Now()
	if ok, err := s.Finish(env.ctx, e, Result{ID: "short-1", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	deadline := began.Add(2*ttl + 2*time.Second)
	for {
		sent, err := s.WasSent(env.ctx, 0, "short-1")
		if err != nil {
			t.Fatal(err)
		}
		held := time.Since(began)
		if !sent {
			if held < ttl {
				t.Errorf("the window forgot a job %v after it was accepted, before its TTL of %v", held, ttl)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window still holds a job %v after it was accepted, past twice its TTL of %v", held, ttl)
		}
		time.Sleep(20 * time.Millisecond) // polls Redis's clock; nothing here can be stepped
	}
	// Redis expires the keys at the moment the slice is no longer looked in.
	expireBy := time.Now().Add(time.Second)
	for n := len(env.c.Keys(env.ctx, s.Keys(0).Window+":*").Val()); n != 0; n = len(env.c.Keys(env.ctx, s.Keys(0).Window+":*").Val()) {
		if time.Now().After(expireBy) {
			t.Fatalf("%d window keys left a second after the job was forgotten, want 0 (they expire whole)", n)
		}
		time.Sleep(10 * time.Millisecond) // polls Redis's expiry
	}
}

// windowKeysOf are the keys that accepting id at Redis's time now writes in the window at base
// with a TTL of ttl, into a slice with the given fan-out: the slice's key and id's bucket.
func windowKeysOf(t *testing.T, env *env, base string, ttl time.Duration, fanout uint32, id string) []string {
	t.Helper()
	f := windowField(id)
	h := uint32(f[0])<<24 | uint32(f[1])<<16 | uint32(f[2])<<8 | uint32(f[3])
	slice := base + ":s" + strconv.FormatInt(redisMs(t, env)/ttl.Milliseconds(), 10)
	return []string{slice, slice + ":" + strconv.FormatUint(uint64(h%fanout), 10)}
}

// TestWindowLeavesTheKeysOf010Alone: release 0.1.0 kept its window under the same base, with
// buckets named by number (<base>:<i>), which an upgraded shard still holds until they expire.
// This window's keys are never theirs: a 0.1.0 bucket whose number is the slice's changes
// nothing this window reads, and nothing this window writes changes it.
func TestWindowLeavesTheKeysOf010Alone(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttl = time.Hour
	now := redisMs(t, env)
	slice := strconv.FormatInt(now/ttl.Milliseconds(), 10)
	old := base + ":" + slice // a bucket of 0.1.0's table, numbered as the slice is
	if err := env.c.HSet(env.ctx, old, "f", "1", "n", "7", windowField("old"), "1796000000").Err(); err != nil {
		t.Fatal(err)
	}
	windowAdd(t, env, base, now, ttl, windowIDs("new", 0, 300)...)
	if n := countSeen(windowSeen(t, env, base, now, ttl, windowIDs("new", 0, 300)...)); n != 300 {
		t.Errorf("%d of the 300 jobs accepted found, want all", n)
	}
	if seen := windowSeen(t, env, base, now, ttl, "old", "never"); seen[0] || seen[1] {
		t.Errorf("found %v of a job only 0.1.0's bucket names and of one never accepted, want neither", seen)
	}
	got, err := env.c.HGetAll(env.ctx, old).Result()
	if err != nil || len(got) != 3 || got["f"] != "1" || got["n"] != "7" {
		t.Errorf("0.1.0's bucket after this window's writes: %v, %v; want it as it was", got, err)
	}
}
