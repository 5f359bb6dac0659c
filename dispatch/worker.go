package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// Worker is one worker process's dispatcher: New checks its Config, Run runs it, and Reload
// hands it a new registry while it runs ("tuned by editing registry.yaml").
type Worker struct {
	cfg     Config      // after withDefaults; its live part is what Reload swaps
	reloads chan reload // Reload to Run's goroutine, which applies one at a time
	running atomic.Bool // Run was called
	// stopping is set when Run's shutdown begins: Reload then refuses.
	stopping atomic.Bool

	// Set by Run before its loops start; owned by Run's goroutine afterwards (apply runs there).
	limits    *fleetLimits
	health    *redisHealth
	lanes     *laneTable
	laneGroup sync.WaitGroup // lane readers, each of which waits for its own sends
	abort     chan struct{}  // closed when the grace period ends
	campaigns *campaignFeeder
	inHand    *inHand
}

type reload struct {
	reg    *providers.Registry
	sender Sender
	done   chan error
}

// New checks cfg and returns a Worker ready to Run.
func New(cfg Config) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, reloads: make(chan reload)}, nil
}

// ErrReloadRefused is what every error of Reload about the registry itself unwraps to.
var ErrReloadRefused = errors.New("dispatch: reload refused")

// Reload makes reg the registry in force, with sender built for it (nil keeps the sender in
// force), without dropping any send in flight: sends in flight finish with the sender and the
// limits they started with, and new ones use the new. It changes, per provider, the rate and
// burst (re-shared by the live replicas), the in-flight cap (unless a budget owns the caps),
// the retries' share and the per-recipient cap, the breaker settings (a changed breaker
// section starts a fresh breaker), the timeouts and host lists (through sender) and the
// routing; the budget's total and half-life. A provider added starts its lanes on every shard.
// Some settings apply only at a restart (heartbeat, host_breaker, adding or removing a
// budget, the budget's period): Reload logs which.
//
// Removing a provider is refused (the error wraps ErrReloadRefused): its lanes would hold jobs
// that nothing reads. Drain it first (docs/operations.md, "Orphan lanes"). Reload blocks until
// Run has applied reg, or refused it, or ctx ends; it fails when Run is not running.
func (w *Worker) Reload(ctx context.Context, reg *providers.Registry, sender Sender) error {
	if reg == nil {
		return errors.New("dispatch: Reload needs a registry")
	}
	if !w.running.Load() || w.stopping.Load() {
		return errors.New("dispatch: Reload: the worker is not running")
	}
	r := reload{reg: reg, sender: sender, done: make(chan error, 1)}
	select {
	case w.reloads <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply is Reload on Run's goroutine.
func (w *Worker) apply(ctx context.Context, r reload) error {
	cfg := &w.cfg
	old := cfg.registry()
	next := r.reg
	var removed []string
	for _, id := range old.IDs() {
		if _, ok := next.Provider(id); !ok {
			removed = append(removed, id)
		}
	}
	if len(removed) > 0 {
		return fmt.Errorf("%w: provider %v is not in the new registry; its lanes would hold jobs that nothing reads. "+
			"Keep the entry until its lanes and retries have drained (docs/operations.md, \"Orphan lanes\"), then remove it",
			ErrReloadRefused, removed)
	}
	var added []*providers.Provider
	for _, p := range next.Providers() {
		if w.limits.get(p.ID) == nil {
			added = append(added, p)
		}
	}
	if len(added) > 0 {
		// Groups first, so that no entry routed to a new lane waits in a stream no group reads.
		if err := cfg.Store.Setup(ctx, next.IDs()); err != nil {
			cfg.Metrics.RedisError(telemetry.OpSetup)
			return fmt.Errorf("dispatch: reload: create the new lanes' groups: %w", err)
		}
	}
	if r.sender != nil {
		cfg.live.sender.Store(&senderBox{r.sender})
	}
	budgeted := old.Budget() != nil
	changes := map[string][]string{}
	for _, pl := range w.limits.all() {
		p, _ := next.Provider(pl.id)
		if c := pl.reconfigure(p, budgeted, old.HostBreaker()); len(c) > 0 {
			changes[pl.id] = c
		}
	}
	for _, p := range added {
		w.startLanes(w.limits.add(p, p.ID == next.Fallback().ID))
		changes[p.ID] = []string{"added"}
	}
	cfg.live.reg.Store(next)
	w.limits.share(cfg.Now(), w.limits.live())
	cfg.Metrics.SetProviders(next.IDs())
	cfg.Metrics.SetProviderProxies(cfg.providerProxies())

	var restart []string
	if old.Heartbeat() != next.Heartbeat() {
		restart = append(restart, "heartbeat")
	}
	if old.HostBreaker() != next.HostBreaker() {
		restart = append(restart, "host_breaker")
	}
	ob, nb := old.Budget(), next.Budget()
	if (ob == nil) != (nb == nil) || (ob != nil && ob.Every != nb.Every) {
		restart = append(restart, "budget")
	}
	cfg.Logger.Info("dispatch: registry reloaded", "changed", changes, "providers", len(next.Providers()))
	if len(restart) > 0 {
		cfg.Logger.Warn("dispatch: these registry sections changed and apply at the next restart", "sections", restart)
	}
	return nil
}

// startLanes makes and starts the lanes of pl's provider on every shard. Run's goroutine only.
func (w *Worker) startLanes(pl *providerLimits) {
	cfg := &w.cfg
	var ls []*lane
	for s := 0; s < cfg.Store.Shards(); s++ {
		// The provider's limits are per process, shared by its lanes on every shard: the slots
		// are what this replica's memory and sockets carry, the bucket its share of the rate.
		l := newLane(laneParams{cfg: cfg, store: cfg.Store, shard: s, provider: pl.id, lim: pl,
			hosts: w.limits.hosts, health: w.health, abort: w.abort, campaigns: w.campaigns, inHand: w.inHand})
		l.start(&w.laneGroup)
		ls = append(ls, l)
	}
	w.lanes.add(pl.id, ls)
}

// allLanes is every lane started.
func (w *Worker) allLanes() []*lane {
	var out []*lane
	for _, id := range w.lanes.providers() {
		for s := 0; s < w.lanes.shards(); s++ {
			out = append(out, w.lanes.of(s, id))
		}
	}
	return out
}
