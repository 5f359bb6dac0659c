// Package deploy_test checks what deploy/ ships: every overlay builds with kustomize, every
// object decodes strictly into its published type, the worker's pods pass Pod Security
// "restricted", the alert rules pass promtool's checks and unit tests, the dashboard decodes
// strictly, and the parts agree with each other and with the worker (probe paths and ports,
// stream names, metric names, the registry, the grace period).
package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
	"github.com/webpush-gateway/webpush-gateway/vapid"
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

// scraped is the worker's own scrape, taken once per test binary by workerMetrics.
var scraped struct {
	once     sync.Once
	families map[string]metricFamily
	err      error
}

// workerMetrics is every family a running worker serves on /metrics: the real binary, built
// from this tree, run against a real redis-server, scraped once it runs. The rules, the
// scaler's query and the dashboard are checked against it, so a metric or label renamed in the
// worker fails here and not in production.
func workerMetrics(t *testing.T) map[string]metricFamily {
	t.Helper()
	scraped.once.Do(func() { scraped.families, scraped.err = scrapeWorker(t) })
	if scraped.err != nil {
		t.Fatalf("scrape a running worker: %v", scraped.err)
	}
	return scraped.families
}

func scrapeWorker(t *testing.T) (map[string]metricFamily, error) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway-worker")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gateway-worker")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	key, err := vapid.GenerateKey("default")
	if err != nil {
		return nil, err
	}
	pem, err := key.MarshalPEM()
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "vapid.pem")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		return nil, err
	}
	r := redistest.Start(t)
	// An upstream's consumer group on the ledger, so that the upstream group gauges have series.
	if err := r.Client(t).XGroupCreateMkStream(context.Background(), "wp:{0}:results", "upstream", "$").Err(); err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "worker.log")
	logs, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	// Behind a proxy (nothing is sent, so none need listen), so that the proxy's series exist.
	worker := exec.Command(bin, "run", "--redis", r.URL(), "--vapid-key", keyFile, "--subject", "mailto:ops@example.com",
		"--http", "127.0.0.1:0", "--registry", "../registry.yaml", "--proxy", "http://127.0.0.1:9")
	worker.Stdout, worker.Stderr = logs, logs
	if err := worker.Start(); err != nil {
		return nil, err
	}
	defer func() {
		_ = worker.Process.Signal(syscall.SIGTERM)
		_ = worker.Wait()
	}()
	// The listener's address is in the log; the families are complete once the worker runs
	// and its first queue statistics are in.
	deadline := time.Now().Add(time.Minute)
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		addr := listenerAddr(logFile)
		if addr == "" {
			continue
		}
		resp, err := http.Get("http://" + addr + telemetry.MetricsPath)
		if err != nil {
			continue
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		// The statistics loop sets the upstream groups before Redis's memory: a scrape between
		// the two has one and not the other, so wait for every family the loop fills.
		complete := true
		for _, name := range []string{"webpush_queue_entries", "webpush_breaker_state", telemetry.UpstreamGroupLag, telemetry.RedisMemoryUsed, telemetry.RedisMaxmemory} {
			if fams[name] == nil {
				complete = false
			}
		}
		if !complete {
			continue
		}
		out := map[string]metricFamily{}
		for name, f := range fams {
			if !strings.HasPrefix(name, "webpush_") {
				continue // the Go and process collectors
			}
			var labels []string
			for _, l := range f.GetMetric()[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
			out[name] = metricFamily{strings.ToLower(f.GetType().String()), labels}
		}
		return out, nil
	}
	data, _ := os.ReadFile(logFile)
	return nil, fmt.Errorf("no complete scrape within a minute; the worker's log:\n%s", data)
}

// listenerAddr is the address in the worker's "http listener" log line, or "".
func listenerAddr(logFile string) string {
	data, _ := os.ReadFile(logFile)
	for _, line := range strings.Split(string(data), "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "http listener" {
			return rec.Addr
		}
	}
	return ""
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
var fixedStreams = []string{"intake", "intake:bulk", "delayed", "dead", "results", "gone"}

// scaledStreams are the streams whose lag more replicas can work off: both intakes and the
// lanes. The others (the delayed set, the ledger, the gone and dead streams) must not drive
// scaling.
func scaledStreams(providerIDs []string) []string {
	s := []string{"intake", "intake:bulk"}
	for _, id := range providerIDs {
		s = append(s, "lane:"+id)
	}
	return s
}

// targetLabels are the labels the Prometheus operator adds to every series it scrapes from a
// PodMonitor, beside the worker's own.
var targetLabels = []string{"namespace", "pod", "container", "endpoint", "job", "instance"}
