// Package dispatch runs the worker: the loops that take delivery jobs from Redis Streams
// (through package stream, the only code that talks to Redis), send them through the adapters
// and record where each job goes next.
//
// One Run starts, per shard, an intake loop for each of the two intakes (transactional and
// bulk: validate, route, move to a provider's lane) and one lane reader per provider, plus one
// promoter (due retries back to their lanes), one reclaimer (entries a consumer that is gone
// left pending, handed back to their streams), one janitor (idle consumers with nothing
// pending), one heartbeat (how many replicas share the fleet-wide rates) and, when
// registry.yaml has a budget, one budget loop (in-flight slots shared by traffic).
// Every move of a job is one atomic script in stream that first checks the entry is still this
// consumer's, so a worker that lost an entry to another replica cannot act on it, and a job is
// in exactly one place at a time.
//
// Provider isolation lives in the lanes. Each provider has, per process, an in-flight budget
// (limits.Slots: a cap, a share for retries, a cap per recipient), this replica's share of its
// request rate (limits.Tokens), and a ratio breaker; unknown hosts share a host breaker, and
// those not yet seen answering only a small pool of the fallback lane's slots. A lane takes its
// slots and tokens first and then reads only what it can start with them (lane.go), so what
// waits for a provider waits in Redis, never in the worker: one entry's turn (turn.go) starts
// as soon as it is read. An entry that may not start (its recipient has its cap in flight, the
// unproven pool is full, the retries hold their share) goes back to the delayed set for its
// turn. A provider that stalls fills its own slots, one that fails opens its own breaker, and in
// both cases its lanes stop reading while the other providers' lanes go on at their own rates.
//
// Delivery is at least once: an entry is acknowledged only after its outcome is written, so a
// worker that dies mid-send leaves the entry pending and another replica hands it back to its
// lane and sends it again (unless the sent mark says the first send was accepted).
package dispatch
