// Package bounds_test runs the real worker binary against a real Redis and pushsim under loads
// a client or a stranger can make, and holds it to the bounds its design promises: memory,
// descriptors and goroutines stay within limits, and delivery goes on.
package bounds_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

const testRegistry = `
version: 1
defaults:
  max_in_flight: 64
  rate: 100000
  burst: 10000
  timeout: 10s
  connect_timeout: 5s
  tls_timeout: 5s
  response_header_timeout: 8s
` + registrytest.EveryProvider

// TestMain builds the worker once; every test runs its process from that binary.
func TestMain(m *testing.M) { os.Exit(workerproc.Main(m)) }

// rig is a real Redis, pushsim, and one worker process of the real binary.
type rig struct {
	t        *testing.T
	redis    *redistest.Server
	sim      *pushsim.Server
	key      string // the application server key subscriptions are bound to
	args     []string
	producer *stream.Producer
	store    *inspect.Inspector
	logs     *proctest.Logs
	w        *workerproc.Worker
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	r := redistest.Start(t)
	sim := simtest.Start(t, pushsim.Config{Dir: dir, MaxDeliveries: 1_000_000})
	key := simtest.VAPIDKey(t)
	pem, _ := key.MarshalPEM()
	keyFile := filepath.Join(dir, "vapid.pem")
	regFile := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(regFile, []byte(testRegistry), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--redis", r.URL(), "--registry", regFile, "--vapid-key", keyFile,
		"--subject", "mailto:ops@webpush-gateway.example.com", "--ca-file", sim.CAFile(),
		"--grace", "2s", "--block", "200ms", "--log-level", "info", "--http", "127.0.0.1:0"}
	for _, ct := range sim.ConnectTo() {
		args = append(args, "--connect-to", ct)
	}
	rg := &rig{t: t, redis: r, sim: sim, key: key.PublicKey(), args: args, logs: proctest.NewLogs(t, 200)}
	rg.producer = stream.NewProducer(r.Client(t), "", 1)
	rg.store = inspect.New(r.Client(t), stream.Options{})
	return rg
}

// start runs the worker; with nofile > 0, under that RLIMIT_NOFILE (soft and hard).
func (rg *rig) start(nofile int) {
	rg.t.Helper()
	w := workerproc.Start(rg.t, workerproc.Options{Logs: rg.logs, NoFile: nofile}, rg.args...)
	rg.w = w
	rg.t.Cleanup(func() {
		if err := w.Stop(20 * time.Second); errors.Is(err, workerproc.ErrNotStopped) {
			rg.t.Errorf("worker did not stop within 20 s of SIGTERM")
		}
	})
}

// httpAddr waits for the worker's "http listener" log line and returns its address.
func (rg *rig) httpAddr() string {
	rg.t.Helper()
	return rg.w.HTTPAddr(rg.t, 30*time.Second)
}

// job is one job line to the subscription sub.
func (rg *rig) job(id string, sub job.Subscription) []byte {
	line, err := json.Marshal(map[string]any{"id": id, "subscription": sub, "payload": "message " + id, "ttl": 3600})
	if err != nil {
		rg.t.Fatal(err)
	}
	return line
}

func (rg *rig) enqueue(lines [][]byte) {
	rg.t.Helper()
	for i := 0; i < len(lines); i += 500 {
		if _, err := rg.producer.Enqueue(context.Background(), lines[i:min(i+500, len(lines))]...); err != nil {
			rg.t.Fatal(err)
		}
	}
}

// waitDone polls the ledger until every id has a terminal record, or fails after deadline.
func (rg *rig) waitDone(ids []string, deadline time.Duration) inspect.AuditReport {
	rg.t.Helper()
	end := time.Now().Add(deadline)
	for {
		rep, _, err := rg.store.Audit(context.Background(), ids)
		if err == nil && rep.ExactlyOne+rep.MoreThanOne == rep.Total {
			return rep
		}
		if time.Now().After(end) {
			rg.t.Fatalf("after %s: %d of %d jobs with a terminal record (last error %v)", deadline, rep.ExactlyOne+rep.MoreThanOne, len(ids), err)
		}
		time.Sleep(250 * time.Millisecond) // polling Redis for a state, not waiting for an event
	}
}

// usage is what the kernel and the worker say the process holds.
type usage struct {
	rssKiB, hwmKiB int64 // VmRSS, VmHWM
	fds            int   // entries of /proc/PID/fd
	goroutines     float64
	openFDs        float64 // process_open_fds
	metricsErr     error   // why /metrics could not be read, when it could not
}

func (u usage) String() string {
	if u.metricsErr != nil {
		return fmt.Sprintf("RSS %d MiB (peak %d MiB), %d fds (no /metrics: %v)", u.rssKiB>>10, u.hwmKiB>>10, u.fds, u.metricsErr)
	}
	return fmt.Sprintf("RSS %d MiB (peak %d MiB), %d fds (process_open_fds %.0f), %.0f goroutines",
		u.rssKiB>>10, u.hwmKiB>>10, u.fds, u.openFDs, u.goroutines)
}

func (rg *rig) usage(addr string) usage {
	rg.t.Helper()
	pid := rg.w.Pid()
	var u usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		rg.t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		name, value, _ := strings.Cut(line, ":")
		f := strings.Fields(value)
		if len(f) == 0 {
			continue
		}
		switch name {
		case "VmRSS":
			u.rssKiB, _ = strconv.ParseInt(f[0], 10, 64)
		case "VmHWM":
			u.hwmKiB, _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		rg.t.Fatal(err)
	}
	u.fds = len(fds)
	code, body, err := get("http://" + addr + "/metrics")
	switch {
	case err != nil:
		u.metricsErr = err
	case code != http.StatusOK:
		u.metricsErr = fmt.Errorf("status %d", code)
	default:
		m := metricstest.Parse(rg.t, body)
		u.goroutines = m.Value(rg.t, "go_goroutines")
		u.openFDs = m.Value(rg.t, "process_open_fds")
	}
	return u
}

// get is one GET on a connection of its own.
func get(url string) (int, []byte, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp.StatusCode, []byte(b.String()), err
}
