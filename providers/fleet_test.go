package providers_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

func TestFleetSections(t *testing.T) {
	defHB := limits.HostBreakerConfig{Failures: 3, Cooldown: 300 * time.Second, MaxHosts: 4096}
	defBeat := providers.HeartbeatConfig{Every: time.Second, StaleAfter: 5 * time.Second}
	tests := []struct {
		name   string
		yaml   []byte
		budget *providers.Budget
		hb     limits.HostBreakerConfig
		beat   providers.HeartbeatConfig
	}{
		{"absent: built-in values, no budget", doc("version: 1", "providers:", fb), nil, defHB, defBeat},
		{"left empty: built-in values", doc("version: 1", "host_breaker:", "heartbeat:", "providers:", fb), nil, defHB, defBeat},
		{"budget with only its total", doc("version: 1", "budget: {total_in_flight: 1}", "providers:", fb),
			&providers.Budget{TotalInFlight: 1, Every: 10 * time.Second, HalfLife: 60 * time.Second}, defHB, defBeat},
		{"everything set", doc("version: 1",
			"budget:", "  total_in_flight: 300", "  every: 2s", "  half_life: 30s",
			"host_breaker:", "  failures: 5", "  cooldown: 1m", "  max_hosts: 100",
			"heartbeat:", "  every: 500ms", "  stale_after: 1s",
			"providers:", fb, "  - id: a", "    hosts: [a.example]"),
			&providers.Budget{TotalInFlight: 300, Every: 2 * time.Second, HalfLife: 30 * time.Second},
			limits.HostBreakerConfig{Failures: 5, Cooldown: time.Minute, MaxHosts: 100},
			providers.HeartbeatConfig{Every: 500 * time.Millisecond, StaleAfter: time.Second}},
		{"partial sections keep the other built-in values", doc("version: 1",
			"host_breaker: {cooldown: 10s}", "heartbeat: {stale_after: 30s}", "providers:", fb), nil,
			limits.HostBreakerConfig{Failures: 3, Cooldown: 10 * time.Second, MaxHosts: 4096},
			providers.HeartbeatConfig{Every: time.Second, StaleAfter: 30 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := providers.Parse("r.yaml", tc.yaml)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := cmp.Diff(tc.budget, reg.Budget()); d != "" {
				t.Errorf("Budget() (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.hb, reg.HostBreaker()); d != "" {
				t.Errorf("HostBreaker() (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.beat, reg.Heartbeat()); d != "" {
				t.Errorf("Heartbeat() (-want +got):\n%s", d)
			}
		})
	}
}

// Budget returns a copy: a caller that edits it does not change the registry.
func TestBudgetIsACopy(t *testing.T) {
	reg, err := providers.Parse("r.yaml", doc("version: 1", "budget: {total_in_flight: 10}", "providers:", fb))
	if err != nil {
		t.Fatal(err)
	}
	reg.Budget().TotalInFlight = 1
	if got := reg.Budget().TotalInFlight; got != 10 {
		t.Errorf("after editing a returned Budget, TotalInFlight = %d, want 10", got)
	}
}

func TestInFlightBounds(t *testing.T) {
	reg, err := providers.Load("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	floors, ceilings := reg.InFlightBounds()
	wantFloors := map[string]int{"fcm": 8, "autopush": 8, "apple": 8, "wns": 8, "fallback": 8}
	wantCeilings := map[string]int{"fcm": 512, "autopush": 256, "apple": 128, "wns": 128, "fallback": 64}
	if d := cmp.Diff(wantFloors, floors); d != "" {
		t.Errorf("floors (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantCeilings, ceilings); d != "" {
		t.Errorf("ceilings (-want +got):\n%s", d)
	}
}

// The Shape example at the top of docs/registry.md, fleet sections included, must load.
func TestDocShapeExample(t *testing.T) {
	reg, err := providers.Parse("docs/registry.md", []byte(registryDocYAML(t, "## Shape")))
	if err != nil {
		t.Fatalf("Shape example does not load:\n%v", err)
	}
	if b := reg.Budget(); b == nil || b.TotalInFlight != 768 {
		t.Errorf("Shape example budget = %+v, want total 768", b)
	}
}
