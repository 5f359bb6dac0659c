package dispatch

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// providerLimits are one provider's admission controls in this process, shared by its lanes on
// every shard. A registry reload reconfigures them in place (reconfigure): the slots and the
// tokens keep what is in flight and in the bucket, a changed breaker section gets a new breaker.
// The limits are safe for concurrent use.
type providerLimits struct {
	id string // immutable
	// cfg is the provider's registry entry now.
	cfg atomic.Pointer[providers.Provider]
	// slots is the in-flight budget of this replica: the cap (max_in_flight, or the share the
	// budget loop gives), the retries' share and the per-recipient cap. A lane takes the slots
	// of a read before it reads.
	slots *limits.Slots
	// tokens is this replica's share of the fleet-wide rate; the heartbeat loop reconfigures it
	// when the number of live replicas changes. A lane takes the tokens of a read before it
	// reads. (A RATE_LIMITED answer pauses its sender, keys, not the provider's rate.)
	tokens *limits.Tokens
	// brk is the provider's ratio breaker: while it is open the lanes do not read.
	brk atomic.Pointer[limits.Breaker]
	// perHost, in the fallback lane only, gives each client-supplied host a ratio breaker and
	// a 429 throttle of its own instead of the provider's breaker and the senders' throttles;
	// nil elsewhere.
	perHost atomic.Pointer[limits.HostLimits]
	// proven, in the fallback lane only, are the hosts seen answering. The others (unproven)
	// share a small pool of the lane's slots (unprovenIn of unprovenCap), so hosts that never
	// answer, however many and however new, cannot hold the slots the answering hosts need.
	// nil elsewhere.
	proven     *limits.ProvenHosts
	unprovenIn atomic.Int64
	// keys, in a lane of a listed provider, pauses the senders (VAPID key names) the provider
	// answered RATE_LIMITED, each on its own (push services limit every key on its own); nil in
	// the fallback lane, whose hosts have their own throttles instead.
	keys *limits.KeyThrottle
	// fleet is the fleet's limits this provider's are part of: the parks of its senders go
	// through it to Redis.
	fleet *fleetLimits
	// onChange is handed every change of the breaker (Config.OnBreakerChange, metrics).
	onChange func(name string, from, to limits.State)

	// paused is set while an operator has paused the provider (`gateway-worker pause`): its
	// lanes read nothing, as with an open breaker; the heartbeat loop sets it.
	paused atomic.Bool

	// arrivals counts the jobs intake moved to this provider's lanes since the budget loop last
	// took the count.
	arrivals atomic.Int64
	// mix is the recent split of the provider's reads between the classes.
	mix classMix
	// turns spreads the put-backs of entries whose recipient or pool was full.
	turns *turns
}

func (pl *providerLimits) provider() *providers.Provider { return pl.cfg.Load() }
func (pl *providerLimits) breaker() *limits.Breaker      { return pl.brk.Load() }

// proxyBreaker is the breaker of the egress proxy the provider's connections go through now,
// nil when they go direct.
func (pl *providerLimits) proxyBreaker() *limits.Breaker {
	return pl.fleet.proxies.of(pl.fleet.cfg.proxyOf(pl.id))
}

// gate is the state that decides whether the provider's lanes read: the provider's breaker's,
// or its proxy's when that one is further from closed (open before half-open before closed),
// and how long it stays open.
func (pl *providerLimits) gate() (limits.State, time.Duration) {
	b := pl.breaker()
	state, openFor := b.State(), b.OpenFor()
	if pb := pl.proxyBreaker(); pb != nil {
		if ps := pb.State(); rank(ps) > rank(state) {
			state, openFor = ps, pb.OpenFor()
		}
	}
	return state, openFor
}

// rank orders breaker states by how little they let through.
func rank(s limits.State) int {
	switch s {
	case limits.Open:
		return 2
	case limits.HalfOpen:
		return 1
	}
	return 0
}
func (pl *providerLimits) hostLimits() *limits.HostLimits { return pl.perHost.Load() }

// fleetLimits are the limits of every provider, plus the host breaker that every unknown host
// shares.
type fleetLimits struct {
	cfg   *Config
	hosts *limits.HostBreaker // immutable after newFleetLimits
	// proxies are the egress proxies' breakers, which every provider behind one shares.
	proxies *proxyBreakers // immutable after newFleetLimits

	mu    sync.RWMutex
	byID  map[string]*providerLimits // guarded by mu; a reload may add providers, never remove one
	order []*providerLimits          // guarded by mu; registry order
	// shared is the live-replica count of the last share, for a reload's re-share.
	shared int // guarded by mu
	// paused are the providers an operator paused, as the last heartbeat read them: a provider
	// a reload adds starts paused when it is one.
	paused map[string]bool // guarded by mu
	// parks are the senders this replica parked since the last beat, for the next one to write
	// (fleetLimits.takeParks).
	parks []stream.KeyPark // guarded by mu
}

// newFleetLimits builds the limits of every provider of the registry. Buckets start at the
// whole fleet's rate (one live replica) until the first heartbeat says how many share it.
func newFleetLimits(cfg *Config) *fleetLimits {
	reg := cfg.registry()
	hb := reg.HostBreaker()
	f := &fleetLimits{
		cfg:     cfg,
		byID:    make(map[string]*providerLimits),
		hosts:   limits.NewHostBreaker(hb),
		proxies: newProxyBreakers(cfg),
	}
	for _, p := range reg.Providers() {
		f.add(p, p.ID == reg.Fallback().ID)
	}
	return f
}

// add makes the limits of a provider this process does not have yet; fallback says it is the
// lane of client-supplied hosts.
func (f *fleetLimits) add(p *providers.Provider, fallback bool) *providerLimits {
	cfg := f.cfg
	pl := &providerLimits{
		id:     p.ID,
		slots:  limits.NewSlots(slotsConfig(p)),
		tokens: limits.NewTokens(p.Rate, max(1, p.Burst)),
		fleet:  f,
		turns:  newTurns(),
		onChange: func(name string, from, to limits.State) {
			// Runs under gobreaker's lock: hand the change on and return.
			cfg.Metrics.BreakerTransition(name, breakerState(to).String())
			if cfg.OnBreakerChange != nil {
				cfg.OnBreakerChange(name, from, to)
			}
		},
	}
	pl.cfg.Store(p)
	pl.brk.Store(limits.NewBreaker(p.ID, p.Breaker, pl.onChange))
	if fallback {
		hb := cfg.registry().HostBreaker()
		pl.proven = limits.NewProvenHosts(hb.MaxHosts)
		pl.perHost.Store(pl.newHostLimits(p, hb))
	} else {
		pl.keys = limits.NewKeyThrottle(limits.KeyThrottleConfig{})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	pl.paused.Store(f.paused[p.ID])
	f.byID[p.ID] = pl
	f.order = append(f.order, pl)
	return pl
}

// gauges are every provider's in-flight requests and cap, token rate, breaker state and pause,
// and the counts of the hosts it limits one by one, read at scrape time
// (Metrics.SetProviderSource): in-memory state, never Redis.
func (f *fleetLimits) gauges() []telemetry.ProviderGauge {
	all := f.all()
	out := make([]telemetry.ProviderGauge, 0, len(all))
	for _, pl := range all {
		out = append(out, telemetry.ProviderGauge{
			Provider: pl.id, InFlight: pl.slots.InFlight(), InFlightLimit: pl.slots.Cap(),
			RatePerSecond: pl.tokens.Rate(), Breaker: breakerState(pl.breaker().State()), Paused: pl.paused.Load(),
			Hosts: pl.hostGauge(f.cfg.Now()),
		})
	}
	return out
}

// hostGauge is the counts at now of the hosts pl limits one by one; nil when it has no
// per-host limits.
func (pl *providerLimits) hostGauge(now time.Time) *telemetry.HostGauge {
	hl := pl.hostLimits()
	if hl == nil {
		return nil
	}
	hl.Expire(now)
	st := hl.Stats()
	return &telemetry.HostGauge{Tracked: st.Tracked, Open: st.Open, Throttled: st.Throttled}
}

// breakerState is a limits.State as the metrics spell it.
func breakerState(s limits.State) telemetry.BreakerState {
	switch s {
	case limits.HalfOpen:
		return telemetry.BreakerHalfOpen
	case limits.Open:
		return telemetry.BreakerOpen
	}
	return telemetry.BreakerClosed
}

// get is the limits of provider id, nil when this process has none.
func (f *fleetLimits) get(id string) *providerLimits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.byID[id]
}

// all is every provider's limits, in registry order (a copy).
func (f *fleetLimits) all() []*providerLimits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]*providerLimits(nil), f.order...)
}

// reconfigure applies a reloaded registry entry p: the slots' cap (unless the budget loop owns
// the caps), retries' share and per-recipient cap; a new breaker when the breaker section
// changed (a breaker's counts belong to its settings); the rate and burst at the next share.
// It reports what changed, for the reload's log line.
func (pl *providerLimits) reconfigure(p *providers.Provider, budgeted bool, hb limits.HostBreakerConfig) []string {
	old := pl.provider()
	var changed []string
	sc := slotsConfig(p)
	if budgeted {
		sc.Cap = pl.slots.Cap()
	}
	if old.MaxInFlight != p.MaxInFlight || old.RetryShare != p.RetryShare || old.PerRecipientInFlight != p.PerRecipientInFlight {
		changed = append(changed, "slots")
	}
	pl.slots.Reconfigure(sc)
	if old.Rate != p.Rate || old.Burst != p.Burst {
		changed = append(changed, "rate")
	}
	if old.Breaker != p.Breaker {
		changed = append(changed, "breaker")
		pl.brk.Store(limits.NewBreaker(p.ID, p.Breaker, pl.onChange))
		if pl.hostLimits() != nil {
			pl.perHost.Store(pl.newHostLimits(p, hb))
		}
	}
	if old.Timeout != p.Timeout || old.ConnectTimeout != p.ConnectTimeout || old.TLSTimeout != p.TLSTimeout ||
		old.ResponseHeaderTimeout != p.ResponseHeaderTimeout {
		changed = append(changed, "timeouts")
	}
	if !slices.Equal(old.Hosts, p.Hosts) {
		changed = append(changed, "hosts")
	}
	pl.cfg.Store(p)
	return changed
}

// slotsConfig is a registry entry's in-flight settings as package limits takes them.
func slotsConfig(p *providers.Provider) limits.SlotsConfig {
	return limits.SlotsConfig{Cap: p.MaxInFlight, RetryShare: p.RetryShare, PerRecipient: p.PerRecipientInFlight}
}

// newHostLimits are the per-host limits of the fallback lane: a host whose breaker opens is
// no longer proven, so its probes and retries go through the unproven pool.
func (pl *providerLimits) newHostLimits(p *providers.Provider, hb limits.HostBreakerConfig) *limits.HostLimits {
	proven := pl.proven
	return limits.NewHostLimits(limits.HostLimitsConfig{
		Breaker: p.Breaker, Rate: p.Rate, Burst: max(1, p.Burst), MaxHosts: hb.MaxHosts,
		OnChange: func(host string, _, to limits.State) {
			if to == limits.Open {
				proven.Forget(host)
			}
		},
	})
}

// unprovenShare is the part of the fallback lane's slots that hosts not seen answering share:
// half, so that hosts that answer keep the other half whatever the unknown ones do, and no less,
// since a host's first request costs a TLS handshake and a lane of many small servers, each new,
// would otherwise crawl; at least one slot, so that a new host can prove itself.
const unprovenShare = 2

// unprovenCap is how many deliveries to unproven hosts may hold slots at once.
func (pl *providerLimits) unprovenCap() int64 {
	return int64(max(1, pl.slots.Cap()/unprovenShare))
}

// tryUnproven takes a place in the unproven hosts' pool; false when it is full.
func (pl *providerLimits) tryUnproven() bool {
	limit := pl.unprovenCap()
	for {
		n := pl.unprovenIn.Load()
		if n >= limit {
			return false
		}
		if pl.unprovenIn.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (pl *providerLimits) releaseUnproven() { pl.unprovenIn.Add(-1) }

// pause marks the providers ids as paused and every other one as not, logging each change.
func (f *fleetLimits) pause(ids []string, log *slog.Logger) {
	paused := make(map[string]bool, len(ids))
	for _, id := range ids {
		paused[id] = true
	}
	f.mu.Lock()
	f.paused = paused
	f.mu.Unlock()
	for _, pl := range f.all() {
		if was := pl.paused.Swap(paused[pl.id]); was != paused[pl.id] {
			if was {
				log.Info("dispatch: provider resumed by an operator; its lanes read again", "provider", pl.id)
			} else {
				log.Warn("dispatch: provider paused by an operator; its lanes read nothing until it is resumed", "provider", pl.id)
			}
		}
	}
}

// live is the number of replicas the buckets were last shared by (1 before the first share).
func (f *fleetLimits) live() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return max(f.shared, 1)
}

// share gives every bucket this replica's part of its provider's fleet-wide rate and burst
// when live replicas share them (at least one token of burst, or no request could ever go).
func (f *fleetLimits) share(now time.Time, live int) {
	live = max(live, 1)
	f.mu.Lock()
	f.shared = live
	f.mu.Unlock()
	for _, pl := range f.all() {
		p := pl.provider()
		rate, burst := p.Rate/float64(live), max(1, p.Burst/live)
		pl.tokens.Configure(now, rate, burst)
		if hl := pl.hostLimits(); hl != nil {
			hl.Configure(now, rate, burst)
		}
	}
}

// parkKey parks the sender key on this provider until until for the whole fleet: the next
// heartbeat writes it to Redis, where every replica's next beat reads it (fleetLimits.parked).
func (pl *providerLimits) parkKey(key string, until time.Time, reason string) {
	f := pl.fleet
	now := f.cfg.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.parks {
		if p.Provider == pl.id && p.Key == key {
			if until.After(p.Until) {
				f.parks[i].Until, f.parks[i].Reason, f.parks[i].At = until, reason, now
			}
			return
		}
	}
	f.parks = append(f.parks, stream.KeyPark{Provider: pl.id, Key: key, Until: until, Reason: reason, At: now})
}

// takeParks hands the parks not yet written to a heartbeat; a beat that fails gives them back
// (returnParks).
func (f *fleetLimits) takeParks() []stream.KeyPark {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.parks
	f.parks = nil
	return p
}

func (f *fleetLimits) returnParks(parks []stream.KeyPark) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parks = append(parks, f.parks...)
}

// parked applies the parks in force fleet-wide, as a heartbeat read them: each pauses its
// sender on its provider here too, until its time (a longer pause this replica learnt stays).
func (f *fleetLimits) parked(parks []stream.KeyPark) {
	for _, p := range parks {
		if pl := f.get(p.Provider); pl != nil && pl.keys != nil {
			pl.keys.Park(p.Key, p.Until, p.Reason)
		}
	}
}

// keyGauges are, for every listed provider and every key name, whether the provider has the
// sender paused at now and until when, read at scrape time (Metrics.SetKeySource).
func (f *fleetLimits) keyGauges() []telemetry.KeyGauge {
	now := f.cfg.Now()
	var out []telemetry.KeyGauge
	for _, pl := range f.all() {
		if pl.keys == nil {
			continue
		}
		paused := map[string]time.Time{}
		for _, st := range pl.keys.Paused(now) {
			paused[st.Key] = st.Until
		}
		for name := range f.cfg.Keys {
			g := telemetry.KeyGauge{Provider: pl.id, Key: name}
			if until, ok := paused[name]; ok {
				g.Throttled, g.ParkedUntil = true, until
			}
			out = append(out, g)
		}
	}
	return out
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
