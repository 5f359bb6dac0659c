package dispatch

import (
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

func TestEWMA(t *testing.T) {
	tests := []struct {
		name              string
		avg, observed     float64
		elapsed, halfLife time.Duration
		want              float64
	}{
		{"one half-life halves the old average", 100, 0, 2 * time.Second, 2 * time.Second, 50},
		{"two half-lives keep a quarter", 100, 0, 4 * time.Second, 2 * time.Second, 25},
		{"steady traffic stays put", 40, 40, time.Second, time.Minute, 40},
		{"the new rate weighs what the old one lost", 0, 80, 2 * time.Second, 2 * time.Second, 40},
		{"no elapsed time changes nothing", 70, 1000, 0, time.Minute, 70},
		{"no half-life follows the traffic at once", 70, 10, time.Second, 0, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ewma(tc.avg, tc.observed, tc.elapsed, tc.halfLife); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("ewma = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBudgetFollowsTraffic steps the budget loop's clock through rounds with given arrivals and
// checks the caps it sets on the providers' slots.
func TestBudgetFollowsTraffic(t *testing.T) {
	floor2 := map[string]string{}
	for _, id := range []string{"fcm", "autopush", "apple", "wns", "fallback"} {
		floor2[id] = "min_in_flight: 2"
	}
	reg, err := providers.Parse("registry.yaml", []byte(testRegistry(floor2)+`budget:
  total_in_flight: 40
  every: 1s
  half_life: 2s
`))
	if err != nil {
		t.Fatal(err)
	}
	// testRegistry gives every provider max_in_flight 16; the floors are 2.
	floors, _ := reg.InFlightBounds()
	cfg := Config{Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	lim := newFleetLimits(&cfg)
	b := newBudget(budgetParams{cfg: &cfg, limits: lim, every: reg.Budget().Every})
	c := &clock{now: time.Unix(1_800_000_000, 0)}

	caps := func() map[string]int {
		out := map[string]int{}
		for _, pl := range lim.all() {
			id := pl.id
			out[id] = pl.slots.Cap()
		}
		return out
	}
	rounds := []struct {
		name     string
		after    time.Duration
		arrivals map[string]int64
		check    func(t *testing.T, caps map[string]int)
	}{
		{"first round: even shares", 0, nil, func(t *testing.T, caps map[string]int) {
			for id, c := range caps {
				if c != 8 {
					t.Errorf("%s: cap %d, want 40/5 = 8", id, c)
				}
			}
		}},
		{"fcm busy, apple some, the rest idle", time.Second, map[string]int64{"fcm": 900, "apple": 100},
			func(t *testing.T, caps map[string]int) {
				if caps["fcm"] != 16 {
					t.Errorf("fcm: cap %d, want its ceiling 16", caps["fcm"])
				}
				if caps["apple"] <= caps["wns"] || caps["apple"] > 16 {
					t.Errorf("apple: cap %d, want more than idle wns (%d)", caps["apple"], caps["wns"])
				}
			}},
		{"autopush takes over", time.Second, map[string]int64{"autopush": 5000},
			func(t *testing.T, caps map[string]int) {
				if caps["autopush"] != 16 {
					t.Errorf("autopush: cap %d, want its ceiling 16", caps["autopush"])
				}
				if caps["apple"] < floors["apple"] || caps["apple"] >= caps["fcm"] {
					t.Errorf("apple: cap %d, want between its floor %d and fcm's %d", caps["apple"], floors["apple"], caps["fcm"])
				}
			}},
		{"a quiet minute: the averages decay together", time.Minute, nil, func(t *testing.T, caps map[string]int) {
			if caps["autopush"] < caps["apple"] {
				t.Errorf("autopush %d below apple %d: decay kept the order", caps["autopush"], caps["apple"])
			}
		}},
	}
	for _, r := range rounds {
		t.Run(r.name, func(t *testing.T) {
			c.Step(r.after)
			for id, n := range r.arrivals {
				lim.get(id).arrivals.Add(n)
			}
			got := b.round(c.Now())
			if diff := cmp.Diff(got, caps()); diff != "" {
				t.Errorf("caps returned by the round and caps of the slots differ (-returned +slots):\n%s", diff)
			}
			sum := 0
			for id, n := range caps() {
				sum += n
				if n < floors[id] || n > 16 {
					t.Errorf("%s: cap %d outside [%d, 16]", id, n, floors[id])
				}
			}
			if sum != 40 {
				t.Errorf("caps %v add up to %d, want the total 40", caps(), sum)
			}
			r.check(t, caps())
			for _, pl := range lim.all() {
				id := pl.id
				if n := pl.arrivals.Load(); n != 0 {
					t.Errorf("%s: %d arrivals left uncounted after the round", id, n)
				}
			}
		})
	}
}

func TestHeartbeatSharesRatesByLiveReplicas(t *testing.T) {
	e := newEnv(t, envOptions{registry: testRegistry(map[string]string{"apple": "rate: 40\nburst: 3"})})
	replica := func(consumer string) (*heartbeat, *fleetLimits) {
		cfg, err := e.config(e.newStore(consumer)).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		lim := newFleetLimits(&cfg)
		return newHeartbeat(heartbeatParams{cfg: &cfg, limits: lim, health: newRedisHealth(1, cfg.Logger, cfg.Now(), nil), hb: e.reg.Heartbeat()}), lim
	}
	h1, lim1 := replica("w1")
	h2, lim2 := replica("w2")
	steps := []struct {
		name      string
		do        func() error
		wantRate1 float64 // apple's rate in replica 1, 0: not checked
		wantRate2 float64
	}{
		{"alone: the whole rate", func() error { return h1.beat(t.Context()) }, 40, 0},
		{"the second one sees two", func() error { return h2.beat(t.Context()) }, 40, 20},
		{"the first one sees two", func() error { return h1.beat(t.Context()) }, 20, 20},
		{"the second one goes quiet past stale_after", func() error {
			e.clock.Step(e.reg.Heartbeat().StaleAfter + time.Millisecond)
			return h1.beat(t.Context())
		}, 40, 20},
		{"it comes back", func() error {
			if err := h2.beat(t.Context()); err != nil {
				return err
			}
			return h1.beat(t.Context())
		}, 20, 20},
		{"it leaves on shutdown: at once", func() error {
			h2.leave()
			return h1.beat(t.Context())
		}, 40, 20},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := lim1.get("apple").tokens.Rate(); s.wantRate1 != 0 && got != s.wantRate1 {
			t.Errorf("%s: replica 1's apple rate %v, want %v", s.name, got, s.wantRate1)
		}
		if got := lim2.get("apple").tokens.Rate(); s.wantRate2 != 0 && got != s.wantRate2 {
			t.Errorf("%s: replica 2's apple rate %v, want %v", s.name, got, s.wantRate2)
		}
	}
}
