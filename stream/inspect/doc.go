// Package inspect is the operators' side of the gateway's Redis keys: the queries and the few
// commands of `gateway-worker status`, `inspect`, `dead`, `pause`, `resume`, `cancel`,
// `campaign` (status, ls, pause, resume, cancel) and `audit`, on an Inspector. Its queries
// return data; the commands print it as their tables and text, or as JSON.
//
// The worker's side is package stream: the key layout, the Store that moves jobs, and the reads
// both sides make (stream.Keyspace). An Inspector needs no consumer name and moves no job of a
// worker's; it reads, scans and may be slow, apart from the commands an operator gives (pause,
// resume, replay, purge, cancel), each one write or one script (embedded beside the Go that
// runs it, with its KEYS, ARGV and reply in its header): replay_dead.lua, cancel_entry.lua,
// cancel_delayed.lua and campaign_state.lua. Nothing the worker runs imports this package.
package inspect
