package stream

import (
	"fmt"
	"testing"
	"time"

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
	if v := copyVerdict(t, env, right, "late-1"); v != Copy {
		t.Errorf("a copy of a job the slow replica just accepted: ToLane = %v, want Copy (%v)", v, Copy)
	}
	if sent, err := right.WasSent(env.ctx, 0, "late-1"); err != nil || !sent {
		t.Errorf("WasSent of a job the slow replica just accepted = %v, %v; want true", sent, err)
	}

	// A job accepted two hours ago by Redis's clock is past the window for the slow replica
	// too, though its clock puts the acceptance in the future.
	windowAdd(t, env, base, redisMs(t, env)-2*time.Hour.Milliseconds(), time.Hour, "stale-1")
	if v := copyVerdict(t, env, behind, "stale-1"); v != Moved {
		t.Errorf("a copy of a job accepted 2 h ago, routed by the slow replica: ToLane = %v, want Moved (%v)", v, Moved)
	}
}

// TestWindowIgnoresAFastClock: a replica whose clock is 40 minutes ahead still counts a job
// accepted 30 minutes ago (its copy is acknowledged unsent, in the intake, in a lane and when
// dead-lettered), and its writes go to Redis's slice of time.
func TestWindowIgnoresAFastClock(t *testing.T) {
	env := newEnv(t)
	ahead := skewedStore(t, env, "ahead", aheadBy)
	base := ahead.Keys(0).Window
	var old []string
	for i := range 30 {
		old = append(old, fmt.Sprintf("old-%d", i))
	}
	windowAdd(t, env, base, redisMs(t, env)-30*time.Minute.Milliseconds(), time.Hour, old...)

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

	// Acceptances by the fast replica land in Redis's slice, not its own: the jobs accepted
	// half an hour ago are still found beside them.
	const fresh = 16
	for i := range fresh {
		id := fmt.Sprintf("new-%d", i)
		e := env.laneEntry(t, ahead, "fcm", id)
		if ok, err := ahead.Finish(env.ctx, e, Result{ID: id, Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0}); err != nil || !ok {
			t.Fatalf("Finish %s = %v, %v", id, ok, err)
		}
	}
	if n := countSeen(windowSeen(t, env, base, redisMs(t, env), time.Hour, append(old, "new-0")...)); n != len(old)+1 {
		t.Errorf("after the fast replica's acceptances the window finds %d of the %d jobs, want all", n, len(old)+1)
	}
}

// TestWindowAgesByRedisClock: the window counts a job for at least the TTL by Redis's clock and
// for less than twice it, whichever replica's clock asks.
func TestWindowAgesByRedisClock(t *testing.T) {
	env := newEnv(t)
	stores := []*Store{skewedStore(t, env, "behind", -behindBy), skewedStore(t, env, "right", 0), skewedStore(t, env, "ahead", aheadBy)}
	base := stores[0].Keys(0).Window
	now := redisMs(t, env)
	ages := []struct {
		id   string
		age  time.Duration
		want bool
	}{{"a59m", 59 * time.Minute, true}, {"a60m", time.Hour - 2*time.Second, true}, {"a121m", 2*time.Hour + time.Minute, false}}
	for _, a := range ages {
		windowAdd(t, env, base, now-a.age.Milliseconds(), time.Hour, a.id)
	}
	for _, s := range stores {
		for _, a := range ages {
			if sent, err := s.WasSent(env.ctx, 0, a.id); err != nil || sent != a.want {
				t.Errorf("%s: WasSent of a job accepted %v ago = %v, %v; want %v", s.Consumer(), a.age, sent, err, a.want)
			}
		}
	}
}
