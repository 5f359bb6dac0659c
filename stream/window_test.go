package stream

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// windowArgsLua's fields_from returns ARGV[first] onwards, and a list as long that gives each
// ARGV[1].
const windowArgsLua = `
local function fields_from(first)
  local fields, times = {}, {}
  for i = first, #ARGV do
    table.insert(fields, ARGV[i])
    table.insert(times, ARGV[1])
  end
  return fields, times
end
`

// windowOps runs window.lua's functions on their own: add fields accepted at a time, and say
// which of some fields count as accepted since a time. Both take the time as ARGV[1] and the
// fields after their other arguments.
var (
	windowOpsLua    = windowLua + windowArgsLua
	windowAddScript = redis.NewScript(windowOpsLua + `
local fields, nows = fields_from(3)
w_add(KEYS[1], w_state(KEYS[1]), fields, nows, ARGV[2])
return 1`)
	windowSeenScript = redis.NewScript(windowOpsLua + `
local fields = fields_from(2)
local out = {}
for i, v in ipairs(w_held_all(KEYS[1], w_state(KEYS[1]), fields)) do
  out[i] = v and v >= tonumber(ARGV[1]) and 1 or 0
end
return out`)
	windowHeldScript = redis.NewScript(windowOpsLua + `
local st, out = w_state(KEYS[1]), {}
for i, f in ipairs(ARGV) do
  out[i] = tonumber(redis.call('HGET', w_key(KEYS[1], st, f), f)) or -1
end
return out`)
)

// TestWindowRemembersEveryAcceptedJob: the window finds every job accepted within the TTL and
// none other, however many splits its table went through; its buckets stay listpacks; and at a
// steady rate its size stays that of the jobs within the TTL, as stale fields are dropped.
func TestWindowRemembersEveryAcceptedJob(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS, perSecond, seconds = 100, 50, 400 // four TTLs at a steady rate
	seen := func(since int64, ids []string) []int64 {
		t.Helper()
		args := []any{since}
		for _, id := range ids {
			args = append(args, windowField(id))
		}
		v, err := windowSeenScript.Run(env.ctx, env.c, []string{base}, args...).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	idsAt := func(s int64) []string { return windowIDs("job", int(s), perSecond) }
	t0s := redisNow(t, env)
	var peakBuckets int
	for s := int64(0); s < seconds; s++ {
		windowAdd(t, env, base, t0s+s, ttlS, idsAt(s)...)
		if s%50 != 49 {
			continue
		}
		now := t0s + s
		// Every job of the last TTL is found; the ones before it are not.
		for back := int64(0); back <= s; back += 7 {
			want := int64(1)
			if back > ttlS {
				want = 0
			}
			for i, v := range seen(now-ttlS, idsAt(s-back)) {
				if v != want {
					t.Fatalf("at %ds: job %s of %ds before: seen %d, want %d", s, idsAt(s - back)[i], back, v, want)
				}
			}
		}
		if got := seen(now-ttlS, []string{"never-1", "never-2", fmt.Sprintf("job-%d-%d", s, perSecond)}); fmt.Sprint(got) != "[0 0 0]" {
			t.Fatalf("jobs never accepted: %v", got)
		}
		keys, err := env.c.Keys(env.ctx, base+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		peakBuckets = max(peakBuckets, len(keys))
		for _, k := range keys {
			if enc := env.c.ObjectEncoding(env.ctx, k).Val(); enc != "listpack" {
				t.Fatalf("bucket %s is a %s (%d fields), want a listpack", k, enc, env.c.HLen(env.ctx, k).Val())
			}
		}
	}
	// The jobs within the TTL are ttlS*perSecond = 5,000: at the load bound of 40 a bucket,
	// about 125 buckets; stale fields not yet dropped may double that, never more.
	if limit := 2 * ttlS * perSecond / 40; peakBuckets > limit {
		t.Errorf("the table grew to %d buckets for %d jobs within the TTL, want at most %d", peakBuckets, ttlS*perSecond, limit)
	}
	state, err := env.c.HGetAll(env.ctx, base).Result()
	if err != nil || !strings.Contains(fmt.Sprint(state), "L:") {
		t.Fatalf("window state %v, %v", state, err)
	}
}

// windowAdd puts ids in the window at base as accepted at now (unix s) with a TTL of ttlS.
func windowAdd(t *testing.T, env *env, base string, now, ttlS int64, ids ...string) {
	t.Helper()
	windowAddWith(t, env, windowAddScript, base, now, ttlS, ids...)
}

// windowAddWith is windowAdd through script, this release's window or an older one's.
func windowAddWith(t *testing.T, env *env, script *redis.Script, base string, now, ttlS int64, ids ...string) {
	t.Helper()
	args := []any{now, ttlS * 1000}
	for _, id := range ids {
		args = append(args, windowField(id))
	}
	if err := script.Run(env.ctx, env.c, []string{base}, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// windowIDs names the n jobs of batch b: prefix-b-0 to prefix-b-(n-1).
func windowIDs(prefix string, b, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d-%d", prefix, b, i)
	}
	return ids
}

// fillWindow puts 4,000 old jobs accepted at now in the window at base, 100 a write, which
// grows its table to 50 buckets or more, and returns how many it put.
func fillWindow(t *testing.T, env *env, base string, now, ttlS int64) int {
	t.Helper()
	const writes, perWrite = 40, 100
	for b := range writes {
		windowAdd(t, env, base, now, ttlS, windowIDs("old", b, perWrite)...)
	}
	return writes * perWrite
}

// TestWindowBucketsOutliveWhatTheyHold: a write renews its bucket's expiry when the sweep's
// last complete round began more than half the TTL ago, so a bucket the sweep last reached long
// ago (its expiry near, as when the rate fell after the table grew) still holds a job for the
// whole TTL after the job went in.
func TestWindowBucketsOutliveWhatTheyHold(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 100
	t0s := redisNow(t, env)
	fillWindow(t, env, base, t0s, ttlS)
	buckets, err := env.c.Keys(env.ctx, base+":*").Result()
	if err != nil || len(buckets) < 50 {
		t.Fatalf("%d buckets (%v); want the table grown to at least 50", len(buckets), err)
	}
	for _, k := range buckets {
		env.c.PExpire(env.ctx, k, time.Second) // swept long ago: a second of its expiry left
	}
	fresh := []string{"new-1", "new-2", "new-3", "new-4", "new-5", "new-6", "new-7"}
	windowAdd(t, env, base, t0s+ttlS, ttlS, fresh...)
	st, err := env.c.HMGet(env.ctx, base, "L", "p").Result()
	if err != nil {
		t.Fatal(err)
	}
	var level, split int
	fmt.Sscan(fmt.Sprint(st[0]), &level)
	fmt.Sscan(fmt.Sprint(st[1]), &split)
	for _, id := range fresh {
		h := binary.BigEndian.Uint32([]byte(windowField(id))[:4])
		i := h % (1 << level)
		if int(i) < split {
			i = h % (2 << level)
		}
		k := fmt.Sprintf("%s:%d", base, i)
		if ttl := env.c.PTTL(env.ctx, k).Val(); ttl < ttlS*time.Second {
			t.Errorf("bucket %s holds %s, accepted now, and expires in %v: before the TTL of %ds ends", k, id, ttl, ttlS)
		}
	}
}

// TestWindowCountsAgainAfterBucketsExpire: buckets that expired whole (no job written to them
// for twice the TTL) leave the table's count within a round of the sweep, so the table does not
// grow for jobs it no longer holds.
func TestWindowCountsAgainAfterBucketsExpire(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 100
	t0s := redisNow(t, env)
	expired := fillWindow(t, env, base, t0s, ttlS)
	buckets, err := env.c.Keys(env.ctx, base+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.c.Del(env.ctx, buckets...).Err(); err != nil { // what their expiry does
		t.Fatal(err)
	}
	// Two rounds' worth of jobs at a sweep a bucket for every 8.
	held := 0
	for b := range 2 * 8 * len(buckets) / 10 {
		ids := windowIDs("new", b, 10)
		windowAdd(t, env, base, t0s+3*ttlS, ttlS, ids...)
		held += len(ids)
	}
	n, err := env.c.HGet(env.ctx, base, "n").Int()
	if err != nil {
		t.Fatal(err)
	}
	if n < held*3/4 || n > held*5/4 {
		t.Errorf("the window counts %d fields and holds %d: its count kept the %d fields of the buckets that expired", n, held, expired)
	}
}

// TestWindowCountsAcrossAnUpgrade: a window whose state predates the sweep's count (no s and a
// fields, its cursor part way round) keeps its count of the jobs it holds through the first
// round of the new count.
func TestWindowCountsAcrossAnUpgrade(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 100
	t0s := redisNow(t, env)
	held := fillWindow(t, env, base, t0s, ttlS)
	buckets := env.c.Keys(env.ctx, base+":*").Val()
	// As an older gateway left it: no s and a, the cursor near the end of a round.
	env.c.HDel(env.ctx, base, "s", "a")
	env.c.HSet(env.ctx, base, "c", len(buckets)-1)
	minRatio := 1.0
	for b := range 8 * len(buckets) / 10 {
		ids := windowIDs("new", b, 10)
		windowAdd(t, env, base, t0s+1, ttlS, ids...)
		held += len(ids)
		n, err := env.c.HGet(env.ctx, base, "n").Int()
		if err != nil {
			t.Fatal(err)
		}
		minRatio = min(minRatio, float64(n)/float64(held))
	}
	if minRatio < 0.75 {
		t.Errorf("the count fell to %.2f of the %d fields held during the first round after the upgrade", minRatio, held)
	}
}

// TestWindowBucketsOutliveTheirFieldsOnRedisClock: on Redis's own clock, with a TTL of two
// seconds, every bucket outlives every field in it by the TTL, through a fast phase (rounds of
// the sweep short enough that writes leave the buckets' expiry to it) and a slow one (rounds
// longer than half the TTL, when writes renew their buckets again).
func TestWindowBucketsOutliveTheirFieldsOnRedisClock(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 2
	redisNow := func() time.Time {
		t.Helper()
		now, err := env.c.Time(env.ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	// check fails unless every bucket expires after each of its fields has stopped counting:
	// a field accepted at second a counts until Redis's clock has passed a + ttlS + 1.
	check := func(when string) {
		t.Helper()
		keys, err := env.c.Keys(env.ctx, base+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		now := redisNow()
		for _, k := range keys {
			ttl, err := env.c.PTTL(env.ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			fields, err := env.c.HGetAll(env.ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if ttl < 0 && len(fields) > 0 {
				t.Fatalf("%s: bucket %s has no expiry (%v)", when, k, ttl)
			}
			expires := now.Add(ttl)
			for f, v := range fields {
				if f == "~" {
					continue
				}
				var at int64
				fmt.Sscan(v, &at)
				if until := time.Unix(at+ttlS+1, 0); expires.Before(until) {
					t.Fatalf("%s: bucket %s expires at %s, before its field accepted at %d stops counting at %s",
						when, k, expires.Format("15:04:05.000"), at, until.Format("15:04:05.000"))
				}
			}
		}
	}
	write := func(b, n int) {
		windowAdd(t, env, base, redisNow().Unix(), ttlS, windowIDs("job", b, n)...)
	}

	env.srv.ResetStats(t)
	b := 0
	// Longer than a bucket's expiry (twice the TTL and a second), so that the buckets made at
	// the start live on only as the sweep renews them.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); b++ {
		write(b, 8)
		if b%10 == 0 {
			check("fast")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stats := env.srv.CommandStats(t)
	if q, err := env.c.HGet(env.ctx, base, "q").Int64(); err != nil || q == 0 {
		t.Fatalf("no complete round of the sweep after %d writes (q %d, %v)", b, q, err)
	}
	// Most writes renewed no bucket: fewer expiries set than buckets written.
	if stats["pexpireat"] >= stats["hset"]/2 {
		t.Errorf("fast phase: %d PEXPIREAT beside %d HSET, want writes to leave most buckets' expiry to the sweep", stats["pexpireat"], stats["hset"])
	}
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); b++ {
		write(b, 8)
		check("slow")
		time.Sleep(200 * time.Millisecond)
	}
}

// bucketOf is the key of the bucket the window at base keeps id in, by its state now.
func bucketOf(t *testing.T, env *env, base, id string) string {
	t.Helper()
	st, err := env.c.HMGet(env.ctx, base, "L", "p").Result()
	if err != nil {
		t.Fatal(err)
	}
	var level, split int
	fmt.Sscan(fmt.Sprint(st[0]), &level)
	fmt.Sscan(fmt.Sprint(st[1]), &split)
	h := binary.BigEndian.Uint32([]byte(windowField(id))[:4])
	i := h % (1 << level)
	if int(i) < split {
		i = h % (2 << level)
	}
	return fmt.Sprintf("%s:%d", base, i)
}

// checkFreshOutlive writes ids at now with a TTL of ttlS and fails unless each one's bucket
// expires after the TTL.
func checkFreshOutlive(t *testing.T, env *env, base string, now, ttlS int64, ids ...string) {
	t.Helper()
	windowAdd(t, env, base, now, ttlS, ids...)
	for _, id := range ids {
		k := bucketOf(t, env, base, id)
		if ttl := env.c.PTTL(env.ctx, k).Val(); ttl < time.Duration(ttlS)*time.Second {
			t.Errorf("bucket %s holds %s, accepted now, and expires in %v: before the TTL of %ds ends", k, id, ttl, ttlS)
		}
	}
}

// TestWindowRenewsAfterTheTTLGrows: the sweep's last round renewed the buckets for the TTL it
// ran at, which vouches for nothing after --sent-ttl is raised: the writes renew their buckets
// for the new TTL until a round has run at it.
func TestWindowRenewsAfterTheTTLGrows(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 100
	t0s := redisNow(t, env)
	fillWindow(t, env, base, t0s, ttlS) // many rounds: the window vouches at this TTL
	checkFreshOutlive(t, env, base, t0s, 10*ttlS, "new-1", "new-2", "new-3", "new-4", "new-5", "new-6", "new-7")
}

// TestWindowRoundSharedWithAnOlderSweepDoesNotVouch: during a rolling upgrade an older
// gateway's sweep takes some of a round's visits, and renews nothing it visits; such a round
// vouches for no bucket, and the writes after it renew theirs.
func TestWindowRoundSharedWithAnOlderSweepDoesNotVouch(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 100
	t0s := redisNow(t, env)
	fillWindow(t, env, base, t0s, ttlS)
	// An older gateway's write of W_SWEEP jobs, whose sweep visits a bucket and renews nothing.
	windowAddWith(t, env, window010AddScript, base, t0s, ttlS, windowIDs("older", 0, 8)...)
	// Writes of one visit each until that round ends.
	for b := 0; ; b++ {
		before, _ := env.c.HGet(env.ctx, base, "c").Int()
		windowAdd(t, env, base, t0s, ttlS, windowIDs("more", b, 8)...) // W_SWEEP
		after, _ := env.c.HGet(env.ctx, base, "c").Int()
		if after < before {
			break
		}
		if b > 10_000 {
			t.Fatal("the round never ended")
		}
	}
	if q, err := env.c.HGet(env.ctx, base, "q").Int64(); err != nil || q != 0 {
		t.Fatalf("after a round an older sweep shared, q = %d (%v), want 0: the round vouches for nothing", q, err)
	}
	buckets, err := env.c.Keys(env.ctx, base+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range buckets {
		env.c.PExpire(env.ctx, k, time.Second) // as a bucket the older sweep passed over might be
	}
	checkFreshOutlive(t, env, base, t0s, ttlS, "new-1", "new-2", "new-3", "new-4", "new-5", "new-6", "new-7")
}

// TestWindowMarkerIsStaleToAnOlderSweep: the previous release's sweep and split compare every
// value in a bucket as a time (tonumber(v) < since); the marker must read as a stale time to
// them, not as something a comparison fails on, or every call of an older gateway that
// reached a sweep would fail during a rolling upgrade or after a rollback.
func TestWindowMarkerIsStaleToAnOlderSweep(t *testing.T) {
	env := newEnv(t)
	base := KeysFor("", 0).Window
	const ttlS = 100
	t0s := redisNow(t, env)
	windowAdd(t, env, base, t0s, ttlS, "job-1")
	olderSweep := redis.NewScript(`
local all, stale = redis.call('HGETALL', KEYS[1]), {}
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) < tonumber(ARGV[1]) then
    table.insert(stale, all[i])
  end
end
return stale`)
	stale, err := olderSweep.Run(env.ctx, env.c, []string{bucketOf(t, env, base, "job-1")}, t0s-ttlS).StringSlice()
	if err != nil {
		t.Fatalf("the previous release's sweep fails on a bucket this one wrote: %v", err)
	}
	if fmt.Sprint(stale) != "[~]" {
		t.Fatalf("the previous release's sweep finds %q stale, want the marker alone", stale)
	}
}
