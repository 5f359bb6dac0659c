package stream

import (
	_ "embed"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// The clocks of replicas that drifted: one 70 minutes behind, one 40 minutes ahead. Either
// drift is more than what is left of the hour's window for some of the jobs in it.
const (
	behindBy = 70 * time.Minute
	aheadBy  = 40 * time.Minute
)

// skewedStore is the Store of consumer whose clock is off by skew.
func skewedStore(t *testing.T, env *env, consumer string, skew time.Duration) *Store {
	t.Helper()
	return env.store(t, consumer, Options{SentTTL: time.Hour, Now: func() time.Time { return time.Now().Add(skew) }}, "fcm")
}

// redisNow is Redis's clock, unix s.
func redisNow(t *testing.T, env *env) int64 {
	t.Helper()
	now, err := env.c.Time(env.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.Unix()
}

// windowHeld is when the window at base took each of ids (unix s), -1 for one it does not hold.
func windowHeld(t *testing.T, env *env, base string, ids ...string) []int64 {
	t.Helper()
	var fields []any
	for _, id := range ids {
		fields = append(fields, windowField(id))
	}
	v, err := windowHeldScript.Run(env.ctx, env.c, []string{base}, fields...).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkAcceptedNow fails unless the window at base took id at Redis's time of now.
func checkAcceptedNow(t *testing.T, env *env, base, id string) {
	t.Helper()
	now := redisNow(t, env)
	if at := windowHeld(t, env, base, id)[0]; at < now-2 || at > now {
		t.Errorf("the window took %s at %d; Redis's clock reads %d", id, at, now)
	}
}

// copyVerdict enqueues a copy of job id and has s route it.
func copyVerdict(t *testing.T, env *env, s *Store, id string) LaneVerdict {
	t.Helper()
	env.enqueue(t, s, validJob(id))
	in := env.readIntake(t, s, 1)[0]
	v, err := s.ToLane(env.ctx, in, "fcm", job.ClassTransactional, id, in.Fields["job"], ms(t0))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWindowIgnoresASlowClock: a replica whose clock is 70 minutes behind records its
// acceptances at Redis's time, so a copy that another replica routes within the hour is
// acknowledged unsent, not sent again; and its own lookups count no more than the hour.
func TestWindowIgnoresASlowClock(t *testing.T) {
	env := newEnv(t)
	behind := skewedStore(t, env, "behind", -behindBy)
	right := skewedStore(t, env, "right", 0)
	base := behind.Keys(0).Window

	e := env.laneEntry(t, behind, "fcm", "late-1")
	if ok, err := behind.Finish(env.ctx, e, Result{ID: "late-1", Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	checkAcceptedNow(t, env, base, "late-1")
	if v := copyVerdict(t, env, right, "late-1"); v != Copy {
		t.Errorf("a copy of a job the slow replica just accepted: ToLane = %v, want Copy (%v)", v, Copy)
	}
	if sent, err := right.WasSent(env.ctx, 0, "late-1"); err != nil || !sent {
		t.Errorf("WasSent of a job the slow replica just accepted = %v, %v; want true", sent, err)
	}

	// A job accepted 61 minutes ago by Redis's clock is past the window for the slow replica
	// too, though its clock puts the acceptance in the future.
	windowAdd(t, env, base, redisNow(t, env)-61*60, 3600, "stale-1")
	if v := copyVerdict(t, env, behind, "stale-1"); v != Moved {
		t.Errorf("a copy of a job accepted 61 min ago, routed by the slow replica: ToLane = %v, want Moved (%v)", v, Moved)
	}
}

// TestWindowIgnoresAFastClock: a replica whose clock is 40 minutes ahead still counts a job
// accepted 30 minutes ago (its copy is acknowledged unsent, in the intake, in a lane and when
// dead-lettered), and its writes, which sweep the window, purge none of it early.
func TestWindowIgnoresAFastClock(t *testing.T) {
	env := newEnv(t)
	ahead := skewedStore(t, env, "ahead", aheadBy)
	base := ahead.Keys(0).Window
	var old []string
	for i := range 30 {
		old = append(old, fmt.Sprintf("old-%d", i))
	}
	halfHourAgo := redisNow(t, env) - 30*60
	windowAdd(t, env, base, halfHourAgo, 3600, old...)

	if v := copyVerdict(t, env, ahead, "old-0"); v != Copy {
		t.Errorf("a copy of a job accepted 30 min ago, routed by the fast replica: ToLane = %v, want Copy (%v)", v, Copy)
	}
	if sent, err := ahead.WasSent(env.ctx, 0, "old-1"); err != nil || !sent {
		t.Errorf("the fast replica's WasSent of a job accepted 30 min ago = %v, %v; want true", sent, err)
	}
	// A lane copy of it that the fast replica dead-letters: the job has its record already.
	lane := env.copyInLane(t, ahead, "fcm", "old-2")
	if ok, err := ahead.ToDead(env.ctx, lane, DeadRecord{ID: "old-2", Code: "PROVIDER_DOWN", Reason: "gave up", Job: validJob("old-2"), At: t0}); err != nil || !ok {
		t.Fatalf("ToDead = %v, %v", ok, err)
	}
	if n := env.xlen(t, ahead.Keys(0).Dead); n != 0 {
		t.Errorf("the dead stream has %d records of a job accepted 30 min ago, want 0", n)
	}

	// Enough acceptances by the fast replica for the sweep to pass over every bucket.
	const fresh = 64
	for i := range fresh {
		id := fmt.Sprintf("new-%d", i)
		e := env.laneEntry(t, ahead, "fcm", id)
		if ok, err := ahead.Finish(env.ctx, e, Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
			t.Fatalf("Finish %s = %v, %v", id, ok, err)
		}
	}
	checkAcceptedNow(t, env, base, "new-0")
	if c, err := env.c.HGet(env.ctx, base, "c").Int(); err != nil || c == 0 {
		t.Fatalf("the sweep's cursor is %d (%v): no bucket was swept", c, err)
	}
	for i, at := range windowHeld(t, env, base, old...) {
		if at != halfHourAgo {
			t.Errorf("%s, accepted 30 min ago: the window holds it at %d, want %d (purged by the fast replica's sweep)", old[i], at, halfHourAgo)
		}
	}
}

// TestWindowAgesByRedisClock: the window counts a job for the TTL by Redis's clock, to the
// second, and no longer, whichever replica's clock asks.
func TestWindowAgesByRedisClock(t *testing.T) {
	env := newEnv(t)
	stores := []*Store{skewedStore(t, env, "behind", -behindBy), skewedStore(t, env, "right", 0), skewedStore(t, env, "ahead", aheadBy)}
	base := stores[0].Keys(0).Window
	now := redisNow(t, env)
	ages := []struct {
		id   string
		age  time.Duration
		want bool
	}{{"a59m", 59 * time.Minute, true}, {"a60m", time.Hour - 2*time.Second, true}, {"a61m", time.Hour + 2*time.Second, false}}
	for _, a := range ages {
		windowAdd(t, env, base, now-int64(a.age/time.Second), 3600, a.id)
	}
	for _, s := range stores {
		for _, a := range ages {
			if sent, err := s.WasSent(env.ctx, 0, a.id); err != nil || sent != a.want {
				t.Errorf("%s: WasSent of a job accepted %v ago = %v, %v; want %v", s.Consumer(), a.age, sent, err, a.want)
			}
		}
	}
}

// stepBackTTL is the sent TTL of the tests of a clock that stepped back: short, so that they
// wait for expiries on Redis's clock in seconds.
const stepBackTTL = 2 * time.Second

// steppedBack is a store whose ledger's last id is an hour ahead of Redis's clock, as right
// after the clock stepped back an hour: every XADD * until then takes an id in that
// millisecond. It returns the store and that second.
func steppedBack(t *testing.T, env *env) (*Store, int64) {
	t.Helper()
	s := env.store(t, "w1", Options{SentTTL: stepBackTTL}, "fcm")
	aheadS := redisNow(t, env) + 3600
	if err := env.c.XAdd(env.ctx, &redis.XAddArgs{Stream: s.Keys(0).Results, ID: fmt.Sprintf("%d-0", aheadS*1000), Values: []any{"id", "before-the-step"}}).Err(); err != nil {
		t.Fatal(err)
	}
	return s, aheadS
}

// checkAcceptedJobStays records id as accepted through s and fails unless its bucket expires
// after its TTL and the window still has it three quarters of the TTL later, on Redis's clock.
func checkAcceptedJobStays(t *testing.T, env *env, s *Store, id string) {
	t.Helper()
	const ttl = stepBackTTL
	e := env.laneEntry(t, s, "fcm", id)
	if ok, err := s.Finish(env.ctx, e, Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
		t.Fatalf("Finish = %v, %v", ok, err)
	}
	bucket := bucketOf(t, env, s.Keys(0).Window, id)
	if left := env.c.PTTL(env.ctx, bucket).Val(); left < ttl {
		t.Errorf("bucket %s holds the job just accepted and expires in %v, before its TTL of %v ends", bucket, left, ttl)
	}
	time.Sleep(ttl - ttl/4)
	if sent, err := s.WasSent(env.ctx, 0, id); err != nil || !sent {
		t.Errorf("%v after the job was accepted, within its TTL of %v: WasSent = %v, %v; want true", ttl-ttl/4, ttl, sent, err)
	}
}

// TestWindowVouchesOnRedisClockAfterItSteppedBack: after Redis's clock steps back (an NTP step,
// a restored VM, a failover to a replica whose clock is behind), the ledger's ids stay at the
// last one until the clock catches up, so every acceptance of that time carries the same second,
// ahead of Redis's clock, and the sweep's rounds, timed by those acceptances, take no time at
// all. The buckets' expiries must hold on Redis's clock all the same: a job accepted after a
// quiet spell longer than the TTL lands in a bucket the sweep last renewed before it, and that
// bucket must outlive the job's TTL.
func TestWindowVouchesOnRedisClockAfterItSteppedBack(t *testing.T) {
	env := newEnv(t)
	const ttl = stepBackTTL
	s, aheadS := steppedBack(t, env)
	fillWindow(t, env, s.Keys(0).Window, aheadS, int64(ttl/time.Second)) // many rounds at that second
	time.Sleep(2*ttl - ttl/4)                                            // quiet: past the TTL and a second, so the buckets' expiry is near
	checkAcceptedJobStays(t, env, s, "probe")
}

// TestWindowVouchesOnRedisClockWhenItStepsBackMidRound: the clock steps back while a round of
// the sweep is under way, so the round began before the step and its visits renew the buckets
// after it. The round vouches once it completes, and the acceptances after it, at the ledger's
// frozen second, are all "just after" it: the expiries its visits set must not have been
// brought nearer by the step.
func TestWindowVouchesOnRedisClockWhenItStepsBackMidRound(t *testing.T) {
	env := newEnv(t)
	const ttl = stepBackTTL
	const ttlS = int64(ttl / time.Second)
	s, aheadS := steppedBack(t, env) // aheadS: the clock before the step
	base := s.Keys(0).Window
	fillWindow(t, env, base, aheadS, ttlS) // a table of 50 buckets or more
	// A round that began before the step, none of whose visits came before it.
	if err := env.c.HSet(env.ctx, base, "r", aheadS, "rt", ttlS, "c", 0, "k", 1, "s", 0, "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for b, lastC := 0, int64(0); ; b++ { // its visits, at the ledger's frozen second
		windowAdd(t, env, base, aheadS, ttlS, windowIDs("round", b, 100)...)
		c, err := env.c.HGet(env.ctx, base, "c").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if c < lastC {
			break // the round completed and the next began
		}
		lastC = c
		if b > 100 {
			t.Fatal("the round never completed")
		}
	}
	if q, err := env.c.HGet(env.ctx, base, "q").Int64(); err != nil || q != aheadS {
		t.Fatalf("the completed round's start q = %d (%v), want %d: it must vouch for this test to test", q, err, aheadS)
	}
	time.Sleep(2*ttl - ttl/4) // quiet
	checkAcceptedJobStays(t, env, s, "probe")
}

// window010Lua is window.lua as released in 0.1.0: each of its writes renews the buckets it
// writes for a duration on Redis's clock, and its sweep renews none.
//
//go:embed testdata/window_0_1_0.lua
var window010Lua string

var window010AddScript = redis.NewScript(window010Lua + windowArgsLua + `
local fields, nows = fields_from(3)
w_add(KEYS[1], w_state(KEYS[1]), fields, nows, ARGV[2])
return 1`)

// TestWindowOlderReleaseWriteAfterAStepBackStopsTheVouching: during a rolling upgrade, after
// Redis's clock stepped back an hour, a gateway of 0.1.0 writes to a bucket the last round
// vouched for. Its expiry is now a duration on Redis's clock, which ends an hour before the
// moment the round set, so the round must no longer vouch: the next write to that bucket renews
// it, and the job it holds stays for its TTL.
func TestWindowOlderReleaseWriteAfterAStepBackStopsTheVouching(t *testing.T) {
	env := newEnv(t)
	const ttl = stepBackTTL
	const ttlS = int64(ttl / time.Second)
	s, aheadS := steppedBack(t, env) // aheadS: the clock before the step
	base := s.Keys(0).Window
	fillWindow(t, env, base, aheadS, ttlS) // many rounds at that second
	if q, err := env.c.HGet(env.ctx, base, "q").Int64(); err != nil || q == 0 {
		t.Fatalf("q = %d (%v) after many rounds: the last must vouch for this test to test", q, err)
	}
	// The older gateway's write, at Redis's clock.
	windowAddWith(t, env, window010AddScript, base, redisNow(t, env), ttlS, "older")
	bucket := bucketOf(t, env, base, "older")
	probe := ""
	for i := 0; probe == ""; i++ {
		if id := fmt.Sprintf("probe-%d", i); bucketOf(t, env, base, id) == bucket {
			probe = id
		}
	}
	time.Sleep(2*ttl - ttl/4) // quiet: the older write's expiry is near
	checkAcceptedJobStays(t, env, s, probe)
}
