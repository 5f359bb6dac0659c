package dispatch

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// readAhead bounds how far ahead of the token bucket a provider's lanes read: at most about
// this long's worth of tokens (Rate × readAhead) is reserved by sends waiting for their turn.
// Without it, a throttled provider (its rate cut to 1/64) would let every free slot read an
// entry and wait minutes for its token, past the visibility timeout, and another replica's
// reclaimer would take the entry and send it a second time.
const readAhead = time.Second

// recoverEvery is how often a provider's bucket climbs back toward its configured rate after
// throttling. Recover's climb does not depend on the call rate; this only bounds its cost.
const recoverEvery = time.Second

// providerLimits are one provider's admission controls in this process, shared by its lanes on
// every shard. The pointers are immutable after newFleetLimits; the limits are safe for
// concurrent use.
type providerLimits struct {
	p *providers.Provider
	// slots is the in-flight budget of this replica: the cap (max_in_flight, or the share the
	// budget loop gives), the retries' share and the per-recipient cap.
	slots *limits.Slots
	// bucket is this replica's share of the fleet-wide rate; the heartbeat loop reconfigures it
	// when the number of live replicas changes, RATE_LIMITED answers throttle it.
	bucket *limits.Bucket
	// breaker is the provider's ratio breaker: while it is open the lanes do not read.
	breaker *limits.Breaker
	// perHost, in the fallback lane only, gives each client-supplied host a ratio breaker and
	// a 429 throttle of its own instead of breaker and the bucket's throttling (see
	// lane.admit); nil elsewhere.
	perHost *limits.HostLimits

	// paused is set while an operator has paused the provider (`gateway-worker pause`): its
	// lanes read nothing, as with an open breaker; the heartbeat loop sets it.
	paused atomic.Bool

	// arrivals counts the jobs intake moved to this provider's lanes since the budget loop last
	// took the count.
	arrivals atomic.Int64
	// queued counts entries a lane has started (slot taken) that have not yet got their token
	// or left without needing one; the lanes read no further ahead than readAhead's worth of
	// tokens.
	queued atomic.Int64
	// recovered is cfg.Now (unix ns) at the last bucket.Recover.
	recovered atomic.Int64
}

// fleetLimits are the limits of every provider, plus the host breaker that every unknown host
// shares.
type fleetLimits struct {
	byID  map[string]*providerLimits // immutable after newFleetLimits
	order []*providerLimits          // registry order
	hosts *limits.HostBreaker
}

// newFleetLimits builds the limits of every provider of the registry. Buckets start at the
// whole fleet's rate (one live replica) until the first heartbeat says how many share it.
func newFleetLimits(cfg *Config) *fleetLimits {
	reg := cfg.Registry
	hb := reg.HostBreaker()
	f := &fleetLimits{
		byID: make(map[string]*providerLimits),
		hosts: limits.NewHostBreaker(limits.HostBreakerConfig{
			Failures: hb.Failures, Cooldown: hb.Cooldown, MaxHosts: hb.MaxHosts,
		}),
	}
	onChange := func(name string, from, to limits.State) {
		// Runs under gobreaker's lock: hand the change on and return.
		if cfg.OnBreakerChange != nil {
			cfg.OnBreakerChange(name, from, to)
		}
	}
	for _, p := range reg.Providers() {
		perRecipient := p.PerRecipientInFlight
		if perRecipient == 0 {
			perRecipient = limits.NoLimit // the registry spells "no cap" 0, which limits reads as its default
		}
		pl := &providerLimits{
			p: p,
			slots: limits.NewSlots(limits.SlotsConfig{
				Cap: p.MaxInFlight, RetryShare: p.RetryShare, PerRecipient: perRecipient,
			}),
			bucket:  limits.NewBucket(p.Rate, max(1, p.Burst)),
			breaker: limits.NewBreaker(p.ID, breakerConfig(p.Breaker), onChange),
		}
		if p.ID == reg.Fallback().ID {
			pl.perHost = limits.NewHostLimits(limits.HostLimitsConfig{
				Breaker: breakerConfig(p.Breaker), Rate: p.Rate, Burst: max(1, p.Burst), MaxHosts: hb.MaxHosts,
			})
		}
		f.byID[p.ID] = pl
		f.order = append(f.order, pl)
	}
	return f
}

// pause marks the providers ids as paused and every other one as not, logging each change.
func (f *fleetLimits) pause(ids []string, log *slog.Logger) {
	paused := make(map[string]bool, len(ids))
	for _, id := range ids {
		paused[id] = true
	}
	for _, pl := range f.order {
		if was := pl.paused.Swap(paused[pl.p.ID]); was != paused[pl.p.ID] {
			if was {
				log.Info("dispatch: provider resumed by an operator; its lanes read again", "provider", pl.p.ID)
			} else {
				log.Warn("dispatch: provider paused by an operator; its lanes read nothing until it is resumed", "provider", pl.p.ID)
			}
		}
	}
}

// breakerConfig is a registry breaker section as package limits takes it.
func breakerConfig(b providers.BreakerConfig) limits.BreakerConfig {
	return limits.BreakerConfig{
		FailureRatio: b.FailureRatio, Window: b.Window, MinSamples: b.MinSamples,
		Cooldown: b.Cooldown, Probes: b.Probes,
	}
}

// share gives every bucket this replica's part of its provider's fleet-wide rate and burst
// when live replicas share them (at least one token of burst, or no request could ever go).
func (f *fleetLimits) share(now time.Time, live int) {
	live = max(live, 1)
	for _, pl := range f.order {
		rate, burst := pl.p.Rate/float64(live), max(1, pl.p.Burst/live)
		pl.bucket.Configure(now, rate, burst)
		if pl.perHost != nil {
			pl.perHost.Configure(now, rate, burst)
		}
	}
}

// paceWait is how long a lane whose provider has free slots but enough entries queued for
// tokens waits before it looks again: about one token's time, within [5ms, block].
func (pl *providerLimits) paceWait(block time.Duration) time.Duration {
	r := pl.bucket.Rate()
	d := block
	if r > 0 && !math.IsInf(r, 1) {
		d = min(d, time.Duration(float64(time.Second)/r))
	}
	return max(d, 5*time.Millisecond)
}

// readable is how many entries a lane of this provider may read now: no more than the free
// slots, and no more than the tokens the bucket gives within readAhead, less the entries
// already started that have not got theirs. At least 1 whenever a slot is free and nothing is
// queued, so a very slow bucket still moves.
func (pl *providerLimits) readable() int {
	free := pl.slots.Free()
	if free <= 0 {
		return 0
	}
	r := pl.bucket.Rate()
	if math.IsInf(r, 1) || r*readAhead.Seconds() >= float64(free) {
		return free // no limit, or more tokens than slots: the slots decide
	}
	ahead := max(1, int(math.Ceil(r*readAhead.Seconds())))
	return max(0, min(free, ahead-int(pl.queued.Load())))
}

// waitToken takes a token from the provider's bucket, sleeping until its reservation is due.
// The bucket reads now(), the worker's clock; the sleep is a real timer of the delay the
// bucket computed, which is the same thing with the real clock (a test that steps a frozen
// clock stays within the burst). It gives up, handing the token back, when stop ends first.
func (pl *providerLimits) waitToken(stop context.Context, now func() time.Time) error {
	t := now()
	pl.recoverAt(t)
	d, r := pl.bucket.Delay(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-stop.Done():
		r.CancelAt(now())
		return stop.Err()
	}
}

// recoverAt lets the bucket climb back toward its configured rate, at most once per
// recoverEvery: the lanes call it on their way to every send, so a provider with traffic
// recovers on time and one without has nothing to recover for.
func (pl *providerLimits) recoverAt(now time.Time) {
	last := pl.recovered.Load()
	if now.UnixNano()-last < int64(recoverEvery) || !pl.recovered.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	pl.bucket.Recover(now)
}

// breakerResult is what a send's outcome tells the provider's ratio breaker. The provider is
// unwell when it failed (5xx), throttled us or could not be reached; any other answer,
// 404/410 and the other 4xx included, is a healthy round trip. An outcome where nothing was
// sent (refused before the request: a bad payload, a blocked address, a skipped host) says
// nothing about the provider and counts neither way.
func breakerResult(out taxonomy.Outcome) limits.Result {
	switch {
	case out.Code == taxonomy.ProviderDown || out.Code == taxonomy.RateLimited || out.Code == taxonomy.TransportError:
		return limits.Failure
	case out.Code == taxonomy.CircuitOpen || out.Status == 0:
		return limits.Excluded
	}
	return limits.Success
}

// hostResult is what a send's outcome tells the host breaker: no answer at all is a transport
// failure, any HTTP answer (5xx and 429 included) proves the host reachable, and a request
// refused before it left says nothing.
func hostResult(out taxonomy.Outcome) limits.HostResult {
	switch {
	case out.Code == taxonomy.TransportError:
		return limits.TransportFailed
	case out.Status > 0:
		return limits.Answered
	}
	return limits.NotSent
}
