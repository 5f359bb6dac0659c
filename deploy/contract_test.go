// Package deploy_test checks what deploy/ ships: every overlay builds with kustomize, every
// object decodes strictly into its published type, the worker's pods pass Pod Security
// "restricted", the alert rules pass promtool's checks and unit tests, the dashboard decodes
// strictly, and the parts agree with each other and with the worker (probe paths and ports,
// stream names, metric names, the registry, the grace period).
package deploy_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// The names the worker exposes, taken from its own constants: every check reads them from
// here.
const (
	httpPortName = "http" // container port name of `run --http`
	livezPath    = telemetry.LivezPath
	readyzPath   = telemetry.ReadyzPath
	metricsPath  = telemetry.MetricsPath
	defaultGrace = dispatch.DefaultGrace // --grace when GATEWAY_GRACE is not set
)

// httpPort is the port of run's default --http.
var httpPort = func() int32 {
	_, p, err := net.SplitHostPort(telemetry.DefaultAddr)
	n, _ := strconv.Atoi(p)
	if err != nil || n == 0 {
		panic(fmt.Sprintf("telemetry.DefaultAddr %q has no port", telemetry.DefaultAddr))
	}
	return int32(n)
}()

// metricFamily is one metric the worker exports: its type and its labels.
type metricFamily struct {
	typ    string // counter, gauge, histogram
	labels []string
}

// contractMetrics is every family the worker's metrics export, gathered from the telemetry
// package's own registry after one event of each kind, so that a renamed metric or label in
// the worker fails the deploy checks, not a scrape in production.
var contractMetrics = func() map[string]metricFamily {
	reg := telemetry.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.MetricsOptions{Providers: []string{"fcm"}, Keys: []string{"default"}, Version: "v", GoVersion: "go"})
	if err != nil {
		panic(err)
	}
	m.Send("fcm", "ACCEPTED", time.Millisecond, "job")
	m.BreakerTransition("fcm", "open")
	m.JobFinished("fcm", "ACCEPTED")
	m.RetryScheduled("fcm", "PROVIDER_DOWN")
	m.DeadLetter(telemetry.DeadRetriesExhausted)
	m.UnknownAuthority()
	m.RedisError(telemetry.OpRead)
	m.RegistryReload(true, time.Now())
	m.SetReplicas(1)
	m.SetProviderSource(func() []telemetry.ProviderGauge { return []telemetry.ProviderGauge{{Provider: "fcm"}} })
	m.SetQueueStats([]telemetry.QueueStat{{Stream: telemetry.StreamIntake, Entries: 1, Lag: 1, HasPending: true}}, time.Now())
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	out := map[string]metricFamily{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "webpush_") {
			continue // the Go and process collectors
		}
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		out[f.GetName()] = metricFamily{strings.ToLower(f.GetType().String()), labels}
	}
	return out
}()

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
