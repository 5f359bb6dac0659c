// Package telemetry is the worker's observability: the Prometheus series it exports
// (Metrics), its liveness and readiness (Health), the HTTP listener that serves them together
// with pprof (Server), the slog setup (NewLogger, RedisLogger) and the keyed hash that lets a
// log line name an endpoint without holding it (EndpointHash).
//
// The dispatcher calls this package; push-service adapters never do. It imports nothing of
// the repository but taxonomy, for the list of outcome codes.
//
// # Labels come only from bounded sets
//
// Every label value is a provider id from the registry, a taxonomy code, a priority class, a
// dead-letter reason, a breaker state, a VAPID key name, a Redis operation name, a shard number
// or a queue stream name. An endpoint, a host, a job id or a recipient is never a label (a job
// id appears only in an exemplar of webpush_send_duration_seconds and
// webpush_send_wait_seconds). A value outside its fixed set is counted
// under that set's "other" value, and an open set (Redis operations, VAPID key names) holds
// at most MaxLabelValues distinct values before further ones also count as "other": a caller's
// bug shows as a series of its own and is logged once, instead of vanishing or growing the
// number of series without bound.
//
// # Per-replica and shared gauges
//
// The in-flight, limit, rate, breaker and pause gauges describe this replica and are summed or
// maxed per provider across replicas as their meaning requires. The queue gauges
// (webpush_queue_entries, webpush_queue_lag_entries, webpush_oldest_pending_age_seconds,
// webpush_queue_stats_refreshed_timestamp_seconds) and webpush_replicas are read from the
// Redis every replica shares, so every replica reports the same value: aggregate them across
// replicas with max, never sum.
package telemetry
