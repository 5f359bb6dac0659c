package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// leaveTimeout bounds the Leave call on shutdown: Redis may be gone, and the replica then
// stops counting StaleAfter later anyway.
const leaveTimeout = 2 * time.Second

// heartbeatParams configure the heartbeat loop.
type heartbeatParams struct {
	cfg    *Config // shared, read-only after Run applied the defaults
	limits *fleetLimits
	hb     providers.HeartbeatConfig
}

// heartbeat tells the fleet this replica is alive, every hb.Every, and learns how many
// replicas are: the rate and burst in registry.yaml are for the whole fleet, so each replica's
// buckets take 1/live of them. A replica that dies stops counting StaleAfter after its last
// beat; one that shuts down leaves at once.
type heartbeat struct {
	heartbeatParams
	stopper
	// live is the count the buckets were last shared by; owned by the loop's goroutine (and by
	// Run's first beat, before the loop starts).
	live int
}

func newHeartbeat(p heartbeatParams) *heartbeat {
	return &heartbeat{heartbeatParams: p, stopper: newStopper()}
}

// start runs the loop in a goroutine counted in wg; the first round is one period in (Run
// beats once before the lanes start). When the loop stops, the replica leaves the live set.
func (h *heartbeat) start(wg *sync.WaitGroup) {
	goCounted(wg, func() {
		ticking(h.done, h.hb.Every, false, h.cfg.Logger, "heartbeat", h.beat)
		h.leave()
	})
}

// beat records this replica as alive and, when the number of live replicas changed, gives
// every bucket its new share.
func (h *heartbeat) beat(ctx context.Context) error {
	live, err := h.cfg.Store.Heartbeat(ctx, h.cfg.Now(), h.hb.StaleAfter)
	if err != nil {
		return err
	}
	live = max(live, 1) // this replica just wrote itself
	if live != h.live {
		h.limits.share(h.cfg.Now(), live)
		h.cfg.Logger.Info("dispatch: live replicas changed; provider rates re-shared", "live", live, "was", h.live)
		h.live = live
	}
	return nil
}

// leave takes this replica out of the live set, so the others take its share of every rate at
// their next beat. Shutdown runs it after the last send.
func (h *heartbeat) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := h.cfg.Store.Leave(ctx); err != nil {
		h.cfg.Logger.Warn("dispatch: could not leave the live set; the others re-share when it goes stale", "err", err)
	}
}
