// Package stream is the only package that talks to Redis. It holds how every command connects
// (Open, OpenInspector), the key layout (keys.go), the worker's Store, the operators' Inspector
// (whose reports the commands print), and one Lua script per state change of a delivery job:
//
//	intake --ToLane--> lane:<provider> --Finish--> results (+ gone, + the window)
//	   \                  |   \--ToDelayed--> delayed --PromoteDue--> lane:<provider>
//	    \--ToDead-------> dead <--ToDead / caps / Reclaim (too many deliveries)
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
package stream
