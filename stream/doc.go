// Package stream is the worker's side of Redis: with the packages below it (stream/inspect,
// the operators' queries), the only code that talks to Redis. It holds how every command
// connects (Open, OpenClient), the key layout (keys.go), the worker's Store, the producer, and
// one Lua script per state change of a delivery job:
//
//	in, in:bulk --ToLane--> lane:<provider>[:bulk] --Finish--> results (+ gone, + the window)
//	   \                       |   \--ToDelayed--> delayed --PromoteDue--> lane:<provider>[:bulk]
//	    \--ToDead-----------> dead <--ToDead / caps / Requeue (too many deliveries)
//
// A lane is read only as far as its reader can start (ReadLanes takes a count its caller
// already holds slots and tokens for); what the reader could not start, and what a replica
// that is gone left pending, goes back to the delayed set due at once (Requeue), so every
// wait is in Redis, never in a worker.
//
// Every transition script first checks with XPENDING that the entry is still pending and owned
// by the calling consumer, and changes nothing when it is not: a worker whose entry was
// reclaimed by another replica cannot act on it a second time. Then, in the same script, it
// XACKs and XDELs the entry and writes the job's next place, so a job is in exactly one place
// at any moment and acknowledged entries never pile up. Nothing here ever MAXLEN- or
// MINID-trims a stream that a consumer group reads.
//
// Every key of shard s is "<prefix>:{s}:..." so that one shard lives in one Redis Cluster hash
// slot and every script touches a single slot.
//
// Two audiences read these keys. Store is the worker's (dispatch uses it through interfaces of
// its own); the operators' queries and commands (status, where a job is, dead records, pauses,
// cancels, campaigns, audit) are stream/inspect's Inspector, which nothing the worker runs
// imports. What the operators' package needs of this one is all it exports beyond the worker's
// and the producer's API: the key layout (Keys, KeysFor, ShardOf, ReplicasKey, StatesKey,
// PausedKey, ShardsKey, CampaignKeysFor), OpenClient for the Inspector's one client, and
// Keyspace, the reads both audiences make of a prefix (queue statistics, the upstreams'
// consumer groups, Redis's memory, the sent mark, the parked senders, the shards a larger count
// left) with the two worker scripts an operator's command runs too (a cancelled campaign's
// drain, and the campaigns' functions of camp.lua: WithCampaignLib). Both page through Redis
// with stream/internal/scan.
package stream
