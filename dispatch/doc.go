// Package dispatch runs the worker: the loops that take delivery jobs from Redis Streams
// (through package stream, the only code that talks to Redis), send them through the adapters
// and record where each job goes next.
//
// One Run starts, per shard, an intake loop (validate, route, move to a provider's lane) and one
// lane consumer per provider (read only as many jobs as the provider has free in-flight slots,
// send, record the outcome), plus one promoter (due retries back to their lanes), one reclaimer
// (entries a dead consumer left pending), one janitor (idle consumers with nothing pending), one
// heartbeat (how many replicas share the fleet-wide rates) and, when registry.yaml has a
// budget, one budget loop (in-flight slots shared by traffic).
// Every move of a job is one atomic script in stream that first checks the entry is still this
// consumer's, so a worker that lost an entry to the reclaimer cannot act on it, and a job is in
// exactly one place at a time.
//
// Provider isolation lives in the lanes. Each provider has, per process, an in-flight budget
// (limits.Slots: a cap, a share for retries, a cap per recipient), this replica's share of its
// token bucket, and a ratio breaker; unknown hosts share a host breaker, and those not yet seen
// answering only a small pool of the fallback lane's slots and rate. An entry that may not
// start yet because its recipient has its cap in flight (or the unproven hosts' pool is full)
// waits in its lane's parking, in memory and still pending in Redis, without holding up the
// entries behind it. A provider that
// stalls fills its own slots, one that fails opens its own breaker, and in both cases its
// lanes stop reading while the other providers' lanes go on at their own rates.
//
// Delivery is at least once: an entry is acknowledged only after its outcome is written, so a
// worker that dies mid-send leaves the entry pending and another replica reclaims and sends it
// again (unless the sent mark says the first send was accepted).
package dispatch
