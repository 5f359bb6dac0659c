package dispatch

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// leaveTimeout bounds the Leave call on shutdown: Redis may be gone, and the replica then
// stops counting StaleAfter later anyway.
const leaveTimeout = 2 * time.Second

// heartbeatParams configure the heartbeat loop.
type heartbeatParams struct {
	cfg    *Config // shared, read-only after Run applied the defaults
	limits *fleetLimits
	health *redisHealth
	hb     providers.HeartbeatConfig
}

// aliveView is the fleet as this replica's last successful heartbeat saw it: the consumer names
// of the live replicas, this one included, and when (cfg.Now).
type aliveView struct {
	names []string
	at    time.Time
}

// heartbeat tells the fleet this replica is alive, every hb.Every, and learns which replicas
// are: the rate and burst in registry.yaml are for the whole fleet, so each replica's buckets
// take 1/live of them, and the reclaimer leaves alone the entries of every live replica. A
// replica that dies stops counting StaleAfter after its last beat; one that shuts down leaves
// at once. A failed beat is tried again at the next period, never later: a replica that
// comes back from an outage must beat before the others would take it for dead.
type heartbeat struct {
	heartbeatParams
	stopper
	// live is the count the buckets were last shared by; owned by the loop's goroutine (and by
	// Run's first beat, before the loop starts).
	live int
	// view is the last successful beat's list, read by the reclaimer.
	view atomic.Pointer[aliveView]
}

func newHeartbeat(p heartbeatParams) *heartbeat {
	return &heartbeat{heartbeatParams: p, stopper: newStopper()}
}

// start runs the loop in a goroutine counted in wg; the first round is one period in (Run
// beats once before the lanes start). When the loop stops, the replica leaves the live set.
func (h *heartbeat) start(wg *sync.WaitGroup) {
	goCounted(wg, func() {
		ctx, cancel := untilClosed(h.done)
		defer cancel()
		beat := h.cfg.Health.Loop("heartbeat", watchdogBound(h.hb.Every))
		defer beat.Done()
		t := time.NewTicker(h.hb.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				h.leave()
				return
			case <-t.C:
			}
			beat.Tick()
			rctx, cancelRound := roundContext(ctx, h.hb.Every)
			err := h.beat(rctx)
			cancelRound()
			if err != nil && ctx.Err() == nil {
				h.cfg.Logger.Warn("dispatch: heartbeat failed; trying again at the next period", "err", err, "every", h.hb.Every.String())
			}
		}
	})
}

// beat records this replica as alive with its state and the senders it parked since the last
// beat, takes the providers an operator paused and the senders parked fleet-wide, and, when
// the number of live replicas changed, gives every bucket its new share.
func (h *heartbeat) beat(ctx context.Context) error {
	now := h.cfg.Now()
	parks := h.limits.takeParks()
	for i := range parks {
		parks[i].By = h.cfg.Store.Consumer()
	}
	b, err := h.cfg.Store.Heartbeat(ctx, now, h.hb.StaleAfter, h.state(), parks...)
	h.health.observe(-1, telemetry.OpHeartbeat, err, h.cfg.Now())
	if err != nil {
		h.limits.returnParks(parks)
		return err
	}
	h.limits.parked(b.KeyParks)
	names := b.Live
	h.view.Store(&aliveView{names: names, at: now})
	h.limits.pause(b.Paused, h.cfg.Logger)
	live := max(len(names), 1) // this replica just wrote itself
	if live != h.live {
		h.limits.share(h.cfg.Now(), live)
		h.cfg.Logger.Info("dispatch: live replicas changed; provider rates re-shared", "live", live, "was", h.live)
		h.live = live
	}
	return nil
}

func (h *heartbeat) state() string {
	st := stream.WorkerState{Version: h.cfg.Version, Breakers: map[string]string{}}
	for _, pl := range h.limits.all() {
		st.Breakers[pl.id] = breakerState(pl.breaker().State()).String() // as the metrics' labels spell it
		if proxy := h.cfg.proxyOf(pl.id); proxy != "" {
			if st.Proxies == nil {
				st.Proxies, st.ProxyBreakers = map[string]string{}, map[string]string{}
			}
			st.Proxies[pl.id] = proxy
			st.ProxyBreakers[proxy] = breakerState(h.limits.proxies.of(proxy).State()).String()
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// alive is the last successful beat's view, nil before the first.
func (h *heartbeat) alive() *aliveView { return h.view.Load() }

// leave takes this replica out of the live set, so the others take its share of every rate at
// their next beat. Shutdown runs it after the last send.
func (h *heartbeat) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := h.cfg.Store.Leave(ctx); err != nil {
		h.cfg.Logger.Warn("dispatch: could not leave the live set; the others re-share when it goes stale", "err", err)
	}
}
