package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// redisHealth is what this process knows of Redis, per shard: whether it accepts writes, and
// how many outcomes of sends are waiting to be written there. It is the worker's back-pressure:
// while a shard refuses writes (out of memory, a failed save, a read-only replica) or has
// outcomes waiting, its gate is closed and the intake, lanes and reclaimer of that shard take
// no new work, so no push is sent whose outcome could not be recorded. It also knows since when
// Redis has answered without a break, which the reclaimer needs after an outage (see
// reclaimer.allowed). Every loop reports what its Redis calls return (observe); the prober
// keeps the write state fresh even while nothing else writes. Safe for concurrent use.
type redisHealth struct {
	log     *slog.Logger
	metrics *telemetry.Metrics // nil: none

	mu     sync.Mutex
	shards []shardHealth // guarded by mu
	// down is set while calls fail without an answer from Redis (no connection, timeouts),
	// since downSince; upSince is when the current unbroken run of answers began. Guarded by
	// mu.
	down               bool
	downSince, upSince time.Time
	// recovered is set once a recovery was logged; relapse while the current outage began
	// within relapseWindow of that recovery and has not been logged yet. Guarded by mu.
	recovered, relapse bool
	// changed is closed, and replaced, whenever a gate may have opened. Guarded by mu.
	changed chan struct{}
}

// relapseWindow is how soon after a recovery an outage counts as a relapse of the one before
// (logged only once it lasts this long).
const relapseWindow = 2 * time.Second

type shardHealth struct {
	refused   error // the write refusal that closed the gate; nil while writes are accepted
	unwritten int   // outcomes retrying their write
}

func newRedisHealth(shards int, log *slog.Logger, now time.Time, metrics *telemetry.Metrics) *redisHealth {
	return &redisHealth{log: log, metrics: metrics, shards: make([]shardHealth, shards), upSince: now, changed: make(chan struct{})}
}

// observe takes the result of a Redis call of kind op made for shard (-1: a call of no one
// shard, such as the heartbeat); an error counts in the metrics under op. A write refusal
// closes the shard's gate until the prober finds that the shard accepts writes again (probed):
// the scripts that record outcomes run even while Redis refuses other writes, so their success
// proves nothing. A call that got no answer marks Redis down until any call gets one.
func (h *redisHealth) observe(shard int, op telemetry.RedisOp, err error, now time.Time) {
	h.note(shard, op, err, now, false)
}

// probed takes the result of a write probe of shard: success reopens a gate that a write
// refusal closed.
func (h *redisHealth) probed(shard int, err error, now time.Time) {
	h.note(shard, telemetry.OpProbe, err, now, true)
}

func (h *redisHealth) note(shard int, op telemetry.RedisOp, err error, now time.Time, probe bool) {
	if err != nil && !errors.Is(err, context.Canceled) {
		h.metrics.RedisError(op)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil || !stream.Unreachable(err) && !stream.WriteRefused(err):
		// An answer, even an error reply of another kind: Redis is reachable.
		if h.down {
			h.down = false
			h.upSince = now
			if h.relapse {
				h.relapse = false
				h.log.Debug("dispatch: redis answers again after a relapse", "after", now.Sub(h.downSince).Round(time.Millisecond).String())
			} else {
				h.recovered = true
				h.log.Info("dispatch: redis is reachable again", "after", now.Sub(h.downSince).Round(time.Millisecond).String())
			}
			h.wake()
		}
	case stream.Unreachable(err):
		switch {
		case !h.down:
			h.down = true
			h.downSince = now
			// Right after Redis comes back, calls on connections its restart cut still fail
			// for a moment: such a relapse closes the gates like any outage but is only
			// logged once it lasts (below), so that one outage is one pair of lines.
			h.relapse = h.recovered && now.Sub(h.upSince) < relapseWindow
			if h.relapse {
				h.log.Debug("dispatch: redis unreachable again just after it answered", "err", err)
			} else {
				h.log.Warn("dispatch: redis is unreachable; taking no new work until it answers", "err", err)
			}
		case h.relapse && now.Sub(h.downSince) >= relapseWindow:
			h.relapse = false
			h.log.Warn("dispatch: redis is unreachable; taking no new work until it answers", "err", err,
				"since", now.Sub(h.downSince).Round(time.Millisecond).String())
		}
	}
	if shard < 0 || shard >= len(h.shards) {
		return
	}
	sh := &h.shards[shard]
	switch {
	case stream.WriteRefused(err):
		if sh.refused == nil {
			h.log.Warn("dispatch: redis refuses writes; this shard takes no new work until it accepts them again (outcomes of sends already made are still written)",
				"shard", shard, "err", err)
		}
		sh.refused = err
	case probe && err == nil && sh.refused != nil:
		sh.refused = nil
		h.log.Info("dispatch: redis accepts writes again; taking new work", "shard", shard)
		h.wake()
	}
}

// wake opens every waiter's eyes: a gate may have opened. Caller holds mu.
func (h *redisHealth) wake() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// unwritten counts an outcome of shard that failed to be written and is being retried (+1), or
// that finally was or was given up (-1).
func (h *redisHealth) unwritten(shard, delta int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shards[shard].unwritten += delta
	if h.shards[shard].unwritten == 0 {
		h.wake()
	}
}

// open reports whether shard may take new work.
func (h *redisHealth) open(shard int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.openLocked(shard)
}

func (h *redisHealth) openLocked(shard int) bool {
	sh := h.shards[shard]
	return !h.down && sh.refused == nil && sh.unwritten == 0
}

// waitOpen waits until shard may take new work, or ctx ends (false). A closed gate is looked
// at again at least every recheck, since the writes that reopen it happen elsewhere.
func (h *redisHealth) waitOpen(ctx context.Context, shard int, recheck time.Duration) bool {
	for {
		h.mu.Lock()
		if h.openLocked(shard) {
			h.mu.Unlock()
			return true
		}
		ch := h.changed
		h.mu.Unlock()
		t := time.NewTimer(recheck)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// upFor is how long Redis has answered without a break at now; 0 while it is down.
func (h *redisHealth) upFor(now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return 0
	}
	return now.Sub(h.upSince)
}

// retry runs op, a Redis call for shard, until it succeeds, logging each failure and backing
// off between tries (redisRetryMin doubling to redisRetryMax). It gives up only when ctx ends
// or stop is closed (nil: never), returning the last error. For an outcome (the record of a
// send, or of a job that ends without one), every failure keeps the shard's gate closed until
// the write goes through: the worker takes no new work while it cannot record what it did.
// Errors from stream never carry an endpoint or key material, so they are logged as they are.
func (h *redisHealth) retry(ctx context.Context, stop <-chan struct{}, shard int, kind telemetry.RedisOp, what string, outcome bool, now func() time.Time, op func(context.Context) error) error {
	var backoff redisBackoff
	counted := false
	defer func() {
		if counted {
			h.unwritten(shard, -1)
		}
	}()
	for {
		err := op(ctx)
		if ctx.Err() == nil {
			h.observe(shard, kind, err, now())
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || closed(stop) {
			return err
		}
		if outcome && !counted {
			counted = true
			h.unwritten(shard, +1)
		}
		h.log.Warn("dispatch: redis call failed; retrying", "op", what, "shard", shard, "err", err,
			"retry_in", max(backoff.next, redisRetryMin).String())
		if !backoff.wait(ctx, stop) {
			return err
		}
	}
}
