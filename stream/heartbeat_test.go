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
