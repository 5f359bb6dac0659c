package providers

import "time"

// The bounds of every registry setting. Each is chosen from what a worker can honour, so that a
// file `gateway-worker check` passes is a file `gateway-worker run` can start with and run: a
// value beyond a bound is a unit slip or a missing digit, and is refused with the bound and
// its reason. docs/registry.md lists them with the same reasons. The exported ones are the
// capacity other packages size things by.
const (
	// MaxProviders bounds the entries of a registry. Every replica gives each provider a lane
	// reader per shard, and each reader holds a blocking Redis connection: 64 providers are
	// already 65 connections per shard per replica, besides the provider's limits, breaker,
	// transport and metrics series.
	MaxProviders = 64
	// MaxHostsPerProvider bounds one entry's hosts. A push service has a handful of endpoint
	// host names (a host also covers its subdomains); hundreds are a generated list, whose
	// hosts belong under fallback.
	MaxHostsPerProvider = 256
	// MaxInFlight bounds max_in_flight (and min_in_flight, per_recipient_in_flight). It is per
	// replica: each request in flight holds a goroutine, its encrypted body, an HTTP/2 stream
	// or a connection of its own, and the lane buffers one entry per slot on every shard.
	// More concurrency comes from more replicas.
	MaxInFlight = 10_000
	// MaxTotalInFlight bounds what one replica holds in flight for all providers together:
	// budget.total_in_flight, or without a budget the sum of the entries' max_in_flight. At some
	// tens of KB per request (and a socket each where a service speaks HTTP/1.1) it is already
	// more than a gigabyte of memory.
	MaxTotalInFlight = 65_536
	// MaxTrackedHosts bounds host_breaker.max_hosts: every tracked host costs up to a kilobyte
	// in every replica (its ratio breaker's rolling window among it), and hosts are
	// client-supplied.
	MaxTrackedHosts = 65_536
	// MaxBulkMinShare bounds bulk_min_share: beyond half, bulk jobs would be guaranteed more
	// of a provider than the transactional jobs that go first.
	MaxBulkMinShare = 0.5
	// DefaultBulkMinShare is bulk_min_share when neither an entry nor defaults: sets it.
	DefaultBulkMinShare = 0.1
)

const (
	// maxRate bounds rate, requests per second for the whole fleet: beyond any quota a push
	// service publishes (a million a second is an unmetered lane already).
	maxRate = 1_000_000
	// maxBurst bounds burst, the fleet's token bucket: a full bucket is sent at once after a
	// quiet spell, and no push service takes a hundred thousand requests at once.
	maxBurst = 100_000
	// maxMinSamples bounds breaker.min_samples: the breaker counts in 32 bits, and a breaker
	// that needs more than a million outcomes in its window never opens at a real rate.
	maxMinSamples = 1_000_000
	// maxProbes bounds breaker.probes: a half-open lane lets about ten probes a second
	// through, so a hundred already keep a recovered service half-open for ten seconds.
	maxProbes = 100
	// maxHostFailures bounds host_breaker.failures: a host that failed a hundred times in a row
	// is down, and each failure may have held a slot of the fallback lane for a whole timeout.
	maxHostFailures = 100

	// maxTTLLimit is twice the longest TTL a major service keeps (FCM's 2,419,200 s; Autopush
	// keeps 30 days): a larger max_ttl is a unit mistake, not a policy.
	maxTTLLimit = 2 * 2419200 * time.Second
	// maxVAPIDLifetime: RFC 8292 §2 caps a JWT's exp at 24 hours ahead (vapid.MaxLifetime; not
	// imported, providers sits below vapid).
	maxVAPIDLifetime = 24 * time.Hour
	// minVAPIDLifetime: a token that lives less than a minute may expire on its way, or by the
	// clock difference between a replica and the push service, and every push is refused.
	minVAPIDLifetime = time.Minute
	// maxTimeout: a request slot held longer is a stalled service, which the breaker must see.
	maxTimeout = 5 * time.Minute
	// maxBreakerSpan bounds window and cooldown (breaker and host breaker): a longer window
	// reacts to an outage too late, a longer cooldown keeps a recovered service closed too long.
	maxBreakerSpan = time.Hour
	// maxBudgetPeriod bounds budget.every and budget.half_life: shares that follow traffic more
	// slowly than that do not follow it.
	maxBudgetPeriod = time.Hour
	// minLoopPeriod bounds budget.every and heartbeat.every from below: each is a loop of every
	// replica (a heartbeat is a Redis write), and one that runs more often than ten times a
	// second costs CPU and Redis round trips without following anything faster.
	minLoopPeriod = 100 * time.Millisecond
	// maxHeartbeat bounds heartbeat.every, and ten of it heartbeat.stale_after: a replica that
	// died must stop counting within seconds, not after minutes.
	maxHeartbeat = time.Minute
)
