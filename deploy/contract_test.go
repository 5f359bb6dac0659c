// Package deploy_test checks what deploy/ ships: every overlay builds with kustomize, every
// object decodes strictly into its published type, the worker's pods pass Pod Security
// "restricted", the alert rules pass promtool's checks and unit tests, the dashboard decodes
// strictly, and the parts agree with each other and with the worker (probe paths and ports,
// stream names, metric names, the registry, the grace period).
package deploy_test

import "time"

// The names the worker exposes, as the contract between the worker and its deployment fixes
// them. Every check reads them from here; when the worker's listener and metrics land, these
// are the values to take from its own constants, and contractMetrics is what a scrape of a
// running worker lists.
const (
	httpPortName = "http" // container port name of `run --http`
	httpPort     = 9090   // its default port
	livezPath    = "/livez"
	readyzPath   = "/readyz"
	metricsPath  = "/metrics"
	defaultGrace = 25 * time.Second // --grace when GATEWAY_GRACE is not set
)

// metricFamily is one metric of the contract: its type and its labels.
type metricFamily struct {
	typ    string // counter, gauge, histogram
	labels []string
}

var contractMetrics = map[string]metricFamily{
	"webpush_sends_total":                             {"counter", []string{"provider", "code"}},
	"webpush_send_duration_seconds":                   {"histogram", []string{"provider"}},
	"webpush_inflight_requests":                       {"gauge", []string{"provider"}},
	"webpush_inflight_limit":                          {"gauge", []string{"provider"}},
	"webpush_rate_limit_per_second":                   {"gauge", []string{"provider"}},
	"webpush_breaker_state":                           {"gauge", []string{"provider"}},
	"webpush_breaker_transitions_total":               {"counter", []string{"provider", "to"}},
	"webpush_jobs_finished_total":                     {"counter", []string{"provider", "code"}},
	"webpush_retries_scheduled_total":                 {"counter", []string{"provider", "code"}},
	"webpush_dead_letters_total":                      {"counter", []string{"reason"}},
	"webpush_unknown_authority_total":                 {"counter", nil},
	"webpush_vapid_signatures_total":                  {"counter", []string{"key"}},
	"webpush_queue_entries":                           {"gauge", []string{"shard", "stream"}},
	"webpush_queue_lag_entries":                       {"gauge", []string{"shard", "stream"}},
	"webpush_oldest_pending_age_seconds":              {"gauge", []string{"shard", "stream"}},
	"webpush_queue_stats_refreshed_timestamp_seconds": {"gauge", nil},
	"webpush_replicas":                                {"gauge", nil},
	"webpush_redis_errors_total":                      {"counter", []string{"op"}},
	"webpush_registry_reload_success":                 {"gauge", nil},
	"webpush_registry_reload_timestamp_seconds":       {"gauge", nil},
	"webpush_build_info":                              {"gauge", []string{"version", "goversion"}},
	"webpush_provider_paused":                         {"gauge", []string{"provider"}},
}

// queueGauges read the same Redis on every replica, so every replica reports the same value:
// combining them across replicas takes max, never sum (a sum would count each entry once per
// replica).
var queueGauges = map[string]bool{
	"webpush_queue_entries":                           true,
	"webpush_queue_lag_entries":                       true,
	"webpush_oldest_pending_age_seconds":              true,
	"webpush_queue_stats_refreshed_timestamp_seconds": true,
	"webpush_replicas":                                true,
}

// fixedStreams are the values of the queue gauges' stream label besides "lane:<provider id>".
var fixedStreams = []string{"intake", "delayed", "dead", "results", "gone"}

// scaledStreams are the streams whose lag more replicas can work off: the intake and the lanes.
// The others (the delayed set, the ledger, the gone and dead streams) must not drive scaling.
func scaledStreams(providerIDs []string) []string {
	s := []string{"intake"}
	for _, id := range providerIDs {
		s = append(s, "lane:"+id)
	}
	return s
}

// targetLabels are the labels the Prometheus operator adds to every series it scrapes from a
// PodMonitor, beside the worker's own.
var targetLabels = []string{"namespace", "pod", "container", "endpoint", "job", "instance"}
