package dispatch

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// budgetParams configure the budget loop.
type budgetParams struct {
	cfg    *Config // shared, read-only after Run applied the defaults
	limits *fleetLimits
	// every is the loop's period, the registry's budget.every at start (the total and the
	// half-life are read from the registry in force at each round).
	every time.Duration
}

// budget shares registry.yaml's in-flight total of one replica among the providers by their
// recent traffic, instead of each provider's fixed max_in_flight: every Budget.Every it updates
// a moving average of the jobs intake moved to each provider's lanes and sets each provider's
// slot cap to its share (providers.Allocate: weighted, at least min_in_flight, at most
// max_in_flight). A provider whose traffic grows gets more slots at the next round; a rare one
// keeps its floor.
type budget struct {
	budgetParams
	stopper
	// avg is the moving average of arrivals per second by provider id, and last the time of
	// the previous round; both owned by the loop's goroutine (and Run's first round, before the
	// loop starts).
	avg  map[string]float64
	last time.Time
}

func newBudget(p budgetParams) *budget {
	return &budget{budgetParams: p, stopper: newStopper(), avg: make(map[string]float64)}
}

// start runs the loop in a goroutine counted in wg; the first round is one period in (Run
// shares once before the lanes start).
func (b *budget) start(wg *sync.WaitGroup) {
	goCounted(wg, func() {
		ticking(b.done, b.every, false, b.cfg, "budget", func(context.Context) error {
			b.round(b.cfg.Now())
			return nil
		})
	})
}

// round takes the arrivals counted since the last round, folds them into the moving average
// and sets every provider's cap. The first round has no history: it shares evenly (every
// weight 0), within the floors and ceilings.
func (b *budget) round(now time.Time) map[string]int {
	cur := b.cfg.registry().Budget()
	if cur == nil {
		// A reload took the budget out: every provider goes back to its own max_in_flight.
		for _, pl := range b.limits.all() {
			pl.slots.SetCap(pl.provider().MaxInFlight)
		}
		return nil
	}
	weights := make(map[string]float64)
	elapsed := now.Sub(b.last)
	first := b.last.IsZero()
	for _, pl := range b.limits.all() {
		n := pl.arrivals.Swap(0)
		if !first && elapsed > 0 {
			b.avg[pl.id] = ewma(b.avg[pl.id], float64(n)/elapsed.Seconds(), elapsed, cur.HalfLife)
		}
		weights[pl.id] = b.avg[pl.id]
	}
	if first || elapsed > 0 {
		b.last = now
	}
	floors, ceilings := b.cfg.registry().InFlightBounds()
	caps := providers.Allocate(cur.TotalInFlight, weights, floors, ceilings)
	changed := false
	for _, pl := range b.limits.all() {
		if c, ok := caps[pl.id]; ok && c != pl.slots.Cap() {
			pl.slots.SetCap(c)
			changed = true
		}
	}
	if changed {
		b.cfg.Logger.Debug("dispatch: in-flight budget re-shared", "caps", caps)
	}
	return caps
}

// ewma folds a rate observed over elapsed into the moving average avg whose weight halves
// every halfLife: the older the traffic, the less it counts, whatever the round's length.
func ewma(avg, observed float64, elapsed, halfLife time.Duration) float64 {
	if halfLife <= 0 {
		return observed
	}
	keep := math.Exp2(-elapsed.Seconds() / halfLife.Seconds())
	return avg*keep + observed*(1-keep)
}
