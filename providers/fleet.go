package providers

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

// Budget shares one in-flight total among the providers of a replica by observed traffic
// instead of giving each its fixed max_in_flight (registry.yaml `budget:`). The dispatcher keeps
// a moving average of arrivals per provider and, every Every, gives each provider what Allocate
// returns for TotalInFlight, between its MinInFlight and MaxInFlight.
type Budget struct {
	// TotalInFlight is the in-flight total of one replica, at least the number of providers
	// (every provider needs one slot).
	TotalInFlight int
	// Every is how often the shares are recomputed.
	Every time.Duration
	// HalfLife is the half-life of the moving average of arrivals: after it, an arrival weighs
	// half as much as a new one.
	HalfLife time.Duration
}

// HeartbeatConfig is how replicas count each other (registry.yaml `heartbeat:`): each writes
// a heartbeat Every, and one not seen for StaleAfter no longer counts. The live count divides
// every provider's fleet-wide rate and burst.
type HeartbeatConfig struct {
	Every      time.Duration
	StaleAfter time.Duration
}

// Budget returns a copy of the file's budget, or nil when it has none (each provider then uses
// its MaxInFlight).
func (r *Registry) Budget() *Budget {
	if r.budget == nil {
		return nil
	}
	b := *r.budget
	return &b
}

// HostBreaker returns the host breaker settings (registry.yaml `host_breaker:`), defaults
// applied: after Failures consecutive transport failures a host is skipped for Cooldown, then
// probed one delivery at a time; at most MaxHosts hosts are tracked (hosts are client-supplied).
func (r *Registry) HostBreaker() limits.HostBreakerConfig { return r.hostBreaker }

// Heartbeat returns the heartbeat settings, defaults applied.
func (r *Registry) Heartbeat() HeartbeatConfig { return r.heartbeat }

// InFlightBounds returns every provider's floor (MinInFlight) and ceiling (MaxInFlight) by
// id, the floors and ceilings arguments of Allocate.
func (r *Registry) InFlightBounds() (floors, ceilings map[string]int) {
	floors, ceilings = make(map[string]int, len(r.list)), make(map[string]int, len(r.list))
	for _, p := range r.list {
		floors[p.ID], ceilings[p.ID] = p.MinInFlight, p.MaxInFlight
	}
	return floors, ceilings
}

// Built-in values of the optional sections.
func builtinHostBreaker() limits.HostBreakerConfig {
	return limits.HostBreakerConfig{Failures: limits.DefaultHostFailures, Cooldown: limits.DefaultHostCooldown, MaxHosts: limits.DefaultMaxHosts}
}

func builtinHeartbeat() HeartbeatConfig {
	return HeartbeatConfig{Every: time.Second, StaleAfter: 5 * time.Second}
}

func builtinBudget() Budget {
	return Budget{Every: 10 * time.Second, HalfLife: 60 * time.Second}
}

// field is one key of a top-level section whose value goes into a T.
type field[T any] struct {
	name  string
	parse func(*yaml.Node, *T) string
}

var budgetFields = []field[Budget]{
	{"total_in_flight", intOf(func(b *Budget) *int { return &b.TotalInFlight }, within(1, MaxTotalInFlight, inFlightWhy))},
	{"every", durationOf(func(b *Budget) *time.Duration { return &b.Every }, loopPeriod(maxBudgetPeriod))},
	{"half_life", durationOf(func(b *Budget) *time.Duration { return &b.HalfLife }, between(maxBudgetPeriod))},
}

var hostBreakerFields = []field[limits.HostBreakerConfig]{
	{"failures", intOf(func(h *limits.HostBreakerConfig) *int { return &h.Failures }, within(1, maxHostFailures, "in a row (such a host is down)"))},
	{"cooldown", durationOf(func(h *limits.HostBreakerConfig) *time.Duration { return &h.Cooldown }, between(maxBreakerSpan))},
	{"max_hosts", intOf(func(h *limits.HostBreakerConfig) *int { return &h.MaxHosts }, within(1, MaxTrackedHosts, "per replica"))},
}

var heartbeatFields = []field[HeartbeatConfig]{
	{"every", durationOf(func(h *HeartbeatConfig) *time.Duration { return &h.Every }, loopPeriod(maxHeartbeat))},
	{"stale_after", durationOf(func(h *HeartbeatConfig) *time.Duration { return &h.StaleAfter }, between(10*maxHeartbeat))},
}

// loopPeriod refuses the period of a replica's loop outside [minLoopPeriod, max].
func loopPeriod(max time.Duration) func(time.Duration) string {
	return func(d time.Duration) string {
		if d > 0 && d < minLoopPeriod {
			return fmt.Sprintf("at least %s (a loop of every replica), got %s", minLoopPeriod, d)
		}
		return between(max)(d)
	}
}

// section parses the mapping of one top-level section over v (which holds its defaults) and
// returns where each field that was given sits.
func section[T any](d *decoder, n *yaml.Node, name string, fields []field[T], v *T) map[string]origin {
	at := map[string]origin{}
	m, ok := d.mapping(n, name)
	if !ok {
		return at
	}
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.name
	}
	given := d.fields(m, name, known, nil)
	for _, f := range fields {
		p, ok := given[f.name]
		if !ok {
			continue
		}
		o := origin{level: fromEntry, line: p.val.Line, field: join(name, f.name)}
		if msg := f.parse(p.val, v); msg != "" {
			d.add(p.val.Line, o.field, msg)
			o.bad = true
		}
		at[f.name] = o
	}
	return at
}

// fleet reads the optional top-level sections into reg. providers is the number of entries
// read, for the budget's lower bound (0 skips that check: the entries were unreadable).
func (d *decoder) fleet(top map[string]pair, reg *Registry, providers int) {
	reg.hostBreaker = builtinHostBreaker()
	if p, ok := top["host_breaker"]; ok {
		section(d, p.val, "host_breaker", hostBreakerFields, &reg.hostBreaker)
	}

	reg.heartbeat = builtinHeartbeat()
	if p, ok := top["heartbeat"]; ok {
		at := section(d, p.val, "heartbeat", heartbeatFields, &reg.heartbeat)
		// A replica is seen once per Every at best; with StaleAfter under two beats one late
		// write (a GC pause, a slow Redis) drops it from the count and every rate jumps.
		hb := reg.heartbeat
		if e, s := at["every"], at["stale_after"]; !e.bad && !s.bad && hb.StaleAfter < 2*hb.Every {
			msg := fmt.Sprintf("%s is less than twice every (%s%s): one late heartbeat would drop a live replica", hb.StaleAfter, hb.Every, source(e))
			if _, set := at["stale_after"]; set {
				d.add(s.line, s.field, msg)
			} else {
				d.add(e.line, e.field, fmt.Sprintf("%s is more than half of stale_after (%s, the built-in default): one late heartbeat would drop a live replica", hb.Every, hb.StaleAfter))
			}
		}
	}

	p, ok := top["budget"]
	if !ok {
		return
	}
	b := builtinBudget()
	at := section(d, p.val, "budget", budgetFields, &b)
	t, set := at["total_in_flight"]
	switch {
	case !set:
		d.add(p.key.Line, "budget.total_in_flight", "required: the in-flight total of one replica to share among the providers (or remove budget:)")
	case t.bad:
	case providers > 0 && b.TotalInFlight < providers:
		d.add(t.line, t.field, fmt.Sprintf("%d is less than the number of providers (%d): each needs at least one request in flight", b.TotalInFlight, providers))
	}
	reg.budget = &b
}
