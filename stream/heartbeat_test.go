package stream

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestHeartbeatLiveCount: replicas count each other through the ZSET; one that stops
// heartbeating stops counting once staleAfter has passed since its last beat, and one that
// leaves stops counting at once. Time is the now each call passes, stepped by the test: no
// sleeps.
func TestHeartbeatLiveCount(t *testing.T) {
	const stale = 5 * time.Second
	env := newEnv(t)
	a := env.store(t, "replica-a", Options{})
	b := env.store(t, "replica-b", Options{})
	c := env.store(t, "replica-c", Options{})
	members := func() []string {
		t.Helper()
		m, err := env.c.ZRange(env.ctx, "wp:{hb}:replicas", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(m) // ZRANGE orders by last beat
		return m
	}

	beat := func(s *Store, now time.Time) int {
		t.Helper()
		beat, err := s.Heartbeat(env.ctx, now, stale, "")
		live := beat.Live
		if err != nil {
			t.Fatalf("%s Heartbeat: %v", s.Consumer(), err)
		}
		if !slices.Contains(live, s.Consumer()) {
			t.Fatalf("%s Heartbeat = %v: the live list misses the replica that wrote it", s.Consumer(), live)
		}
		if d := cmp.Diff(members(), slices.Sorted(slices.Values(live))); d != "" {
			t.Fatalf("%s Heartbeat's live list is not the set's members (-set +returned):\n%s", s.Consumer(), d)
		}
		return len(live)
	}
	steps := []struct {
		name string
		s    *Store
		at   time.Duration // after t0
		want int
	}{
		{"first replica alone", a, 0, 1},
		{"second replica sees both", b, 0, 2},
		{"first sees both", a, time.Second, 2},
		// b last beat at t0: at t0+5s it is exactly stale seconds old and still counts...
		{"b at the edge of stale_after still counts", a, stale, 2},
		// ...one millisecond later it does not.
		{"b stopped heartbeating: no longer counted", a, stale + time.Millisecond, 1},
		{"b comes back", b, stale + 2*time.Millisecond, 2},
		{"a third replica", c, 6 * time.Second, 3},
	}
	for _, st := range steps {
		if got := beat(st.s, t0.Add(st.at)); got != st.want {
			t.Fatalf("%s: %s Heartbeat at t0+%s = %d live, want %d (members %v)", st.name, st.s.Consumer(), st.at, got, st.want, members())
		}
	}
	if d := cmp.Diff([]string{"replica-a", "replica-b", "replica-c"}, members()); d != "" {
		t.Errorf("members (-want +got):\n%s", d)
	}

	// Leave removes at once: the next heartbeat of another replica, at the same instant,
	// counts one less.
	if err := c.Leave(env.ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if got := beat(a, t0.Add(6*time.Second)); got != 2 {
		t.Errorf("after c left, a counts %d live, want 2", got)
	}
	if d := cmp.Diff([]string{"replica-a", "replica-b"}, members()); d != "" {
		t.Errorf("members after Leave (-want +got):\n%s", d)
	}
	if err := c.Leave(env.ctx); err != nil {
		t.Errorf("a second Leave: %v, want nil", err)
	}

	// The set expires on its own once every replica has stopped: the script sets a TTL of
	// two stale periods on every beat.
	ttl, err := env.c.PTTL(env.ctx, "wp:{hb}:replicas").Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 0 || ttl > 2*stale {
		t.Errorf("replicas TTL = %s, want in (0, %s]", ttl, 2*stale)
	}
}

// The replicas key has its own hash tag and follows the prefix; shards do not change it.
func TestHeartbeatKey(t *testing.T) {
	env := newEnv(t)
	s := env.store(t, "r1", Options{Prefix: "gw", Shards: 4})
	if _, err := s.Heartbeat(env.ctx, t0, time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := env.c.ZCard(env.ctx, "gw:{hb}:replicas").Result(); err != nil || n != 1 {
		t.Errorf("ZCARD gw:{hb}:replicas = %d, %v; want 1", n, err)
	}
	for _, tc := range []struct{ prefix, want string }{{"", "wp:{hb}:replicas"}, {"gw", "gw:{hb}:replicas"}} {
		if got := ReplicasKey(tc.prefix); got != tc.want {
			t.Errorf("ReplicasKey(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func TestHeartbeatRefusesBadArguments(t *testing.T) {
	env := newEnv(t)
	tests := []struct {
		name     string
		consumer string
		stale    time.Duration
	}{
		{"no consumer name", "", time.Second},
		{"zero stale_after", "r1", 0},
		{"negative stale_after", "r1", -time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(env.c, env.c, Options{Consumer: tc.consumer})
			if beat, err := s.Heartbeat(env.ctx, t0, tc.stale, ""); err == nil {
				t.Errorf("Heartbeat = %v, nil; want an error", beat)
			}
		})
	}
	if n, _ := env.c.Exists(env.ctx, "wp:{hb}:replicas").Result(); n != 0 {
		t.Errorf("a refused heartbeat wrote the replicas key")
	}
}

// TestHeartbeatCarriesStatesAndPauses: a replica's published state is listed with it while it
// is live and goes with it when it goes stale or leaves; the providers an operator paused come
// back with every beat until resumed.
func TestHeartbeatCarriesStatesAndPauses(t *testing.T) {
	const stale = 5 * time.Second
	env := newEnv(t)
	a := env.store(t, "replica-a", Options{})
	b := env.store(t, "replica-b", Options{})
	if _, err := a.Heartbeat(env.ctx, t0, stale, `{"breakers":{"fcm":"closed"}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Heartbeat(env.ctx, t0, stale, `{"breakers":{"fcm":"open"}}`); err != nil {
		t.Fatal(err)
	}
	reps, err := inspectorOf(a).Replicas(env.ctx, t0, stale)
	if err != nil || len(reps) != 2 || string(reps[1].State) != `{"breakers":{"fcm":"open"}}` || !reps[0].LastSeen.Equal(t0) {
		t.Fatalf("Replicas = %+v, %v", reps, err)
	}
	if err := inspectorOf(a).PauseProvider(env.ctx, Pause{Provider: "autopush", Reason: "incident 42", By: "ops", At: t0}); err != nil {
		t.Fatal(err)
	}
	beat, err := b.Heartbeat(env.ctx, t0.Add(time.Second), stale, `{}`)
	if err != nil || len(beat.Paused) != 1 || beat.Paused[0] != "autopush" {
		t.Fatalf("Heartbeat after a pause = %+v, %v", beat, err)
	}
	ps, err := inspectorOf(a).Pauses(env.ctx)
	if err != nil || len(ps) != 1 || ps[0].Reason != "incident 42" || ps[0].By != "ops" || !ps[0].At.Equal(t0) {
		t.Fatalf("Pauses = %+v, %v", ps, err)
	}
	// a goes stale: b's next beat forgets it and its state.
	if _, err := b.Heartbeat(env.ctx, t0.Add(stale+2*time.Second), stale, `{}`); err != nil {
		t.Fatal(err)
	}
	if n := env.c.HLen(env.ctx, "wp:{hb}:states").Val(); n != 1 {
		t.Errorf("%d states after a went stale, want 1", n)
	}
	if ok, err := inspectorOf(a).ResumeProvider(env.ctx, "autopush"); !ok || err != nil {
		t.Fatalf("Resume = %v, %v", ok, err)
	}
	if ok, _ := inspectorOf(a).ResumeProvider(env.ctx, "autopush"); ok {
		t.Error("a second Resume found a pause")
	}
	if err := b.Leave(env.ctx); err != nil {
		t.Fatal(err)
	}
	if reps, _ := inspectorOf(a).Replicas(env.ctx, t0.Add(stale+2*time.Second), stale); len(reps) != 0 {
		t.Errorf("Replicas after the last one left = %+v", reps)
	}
}
