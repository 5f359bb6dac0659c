// Package cluster_test runs the real gateway-worker binary on the distributed Redis topologies
// it supports, started by internal/testsupport/redistest: Redis Cluster (3 masters with a replica each, more
// shards than masters, so every master serves shards) and Redis Sentinel, with pushsim as every
// push service over TLS and HTTP/2 on loopback. The tests drive the whole pipeline there
// (enqueue, intake, lanes, retries, reclaim after a SIGKILL, ledger, gone, dead, heartbeats and
// `gateway-worker audit`), check the fleet-wide token rates with several replicas, kill a
// master under load (its replica is promoted; nothing is lost, every job ends with exactly one
// terminal record, duplicate sends stay within what was in flight), and change the shard count
// of a live system. No log line or command output may contain CROSSSLOT.
//
//	go test -race -count=1 ./test/cluster/
package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// TestMain builds the worker once; every test runs its processes from that binary.
func TestMain(m *testing.M) {
	// The test's own clients see every failover too; what go-redis logs of it would only break
	// up the benchmarks' output lines.
	redis.SetLogger(quiet{})
	os.Exit(workerproc.Main(m))
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// genericHost is the self-hosted push service the fallback lane serves.
const genericHost = "push.example.net"

// fleetOptions say what newFleet starts.
type fleetOptions struct {
	url      string // the Redis URL every process is given
	prefix   string // --prefix ("" keeps the default)
	shards   int    // --shards
	registry string
	args     []string // more flags for every worker
	sample   int      // pushsim's Config.Sample: 0 checks every push in full
}

// fleet is worker processes of the real binary on one Redis topology, pushsim, and the test's
// own Store on the same URL (for the audit, the producer and Redis reads). Every process's
// output goes to a file of its own, which checkLogs reads.
type fleet struct {
	t        testing.TB
	o        fleetOptions
	dir      string
	sim      *pushsim.Server
	store    *stream.Store
	insp     *inspect.Inspector    // the operators' view: audit, pauses, records
	rdb      redis.UniversalClient // the test's own client, for what it reads beyond the stores
	runArgs  []string
	key      string // the application server key every subscription is bound to
	keyFile  string
	regFile  string
	baseArgs []string // --redis, --prefix, --shards

	logs *proctest.Logs // the output of every process started

	mu      sync.Mutex
	workers []*worker // guarded by mu
}

// worker is one gateway-worker run process.
type worker = workerproc.Worker

func newFleet(t testing.TB, o fleetOptions) *fleet {
	t.Helper()
	dir := t.TempDir()
	sim, err := pushsim.Start(pushsim.Config{Dir: dir, MaxDeliveries: 1_000_000, Lean: true, Sample: o.sample})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	key, err := vapid.GenerateKey("default")
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := key.MarshalPEM()
	f := &fleet{t: t, o: o, dir: dir, sim: sim, key: key.PublicKey(), logs: proctest.NewLogs(t, 6000),
		keyFile: filepath.Join(dir, "vapid.pem"), regFile: filepath.Join(dir, "registry.yaml")}
	if err := os.WriteFile(f.keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	f.setRegistry(o.registry)
	f.baseArgs = []string{"--redis", o.url, "--shards", fmt.Sprint(o.shards)}
	if o.prefix != "" {
		f.baseArgs = append(f.baseArgs, "--prefix", o.prefix)
	}
	f.runArgs = append([]string{"--registry", f.regFile, "--vapid-key", f.keyFile,
		"--subject", "mailto:ops@webpush-gateway.example.com", "--ca-file", sim.CAFile(),
		"--job-id-header", "X-Job-Id", "--visibility-timeout", "2s", "--reclaim-every", "250ms",
		"--retry-base", "200ms", "--retry-cap", "1s", "--grace", "3s", "--block", "200ms",
		"--startup-timeout", "30s", "--log-level", "info", "--http", "127.0.0.1:0"}, o.args...)
	for _, ct := range append(sim.ConnectTo(), net.JoinHostPort(genericHost, "443")+"="+sim.Addr()) {
		f.runArgs = append(f.runArgs, "--connect-to", ct)
	}
	f.store, err = stream.Open(o.url, stream.OpenOptions{Options: stream.Options{Prefix: o.prefix, Shards: o.shards, Consumer: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	if f.insp, err = inspect.Open(o.url, stream.OpenOptions{Options: stream.Options{Prefix: o.prefix, Shards: o.shards}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.insp.Close() })
	if f.rdb, err = stream.OpenClient(o.url, stream.OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.rdb.Close() })
	t.Cleanup(f.stopAll) // before the store and pushsim close: cleanups run last first
	return f
}

// setRegistry writes the registry every worker started from now on reads.
func (f *fleet) setRegistry(yaml string) {
	f.t.Helper()
	if err := os.WriteFile(f.regFile, []byte(yaml), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// startWorker starts one more worker with the fleet's flags and extra ones.
func (f *fleet) startWorker(extra ...string) *worker {
	f.t.Helper()
	args := append(append(append([]string{"run"}, f.baseArgs...), f.runArgs...), extra...)
	w := workerproc.Start(f.t, workerproc.Options{Logs: f.logs, Name: "run-*.log"}, args...)
	f.mu.Lock()
	f.workers = append(f.workers, w)
	f.mu.Unlock()
	return w
}

// startFleet starts n workers on a fleet that has none yet and waits until each runs and
// the heartbeat set lists exactly them.
func (f *fleet) startFleet(n int) []*worker {
	f.t.Helper()
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = f.startWorker()
	}
	f.waitLog(`"msg":"dispatch: running"`, n, 30*time.Second)
	f.waitReplicas(ws...)
	return ws
}

// command is a gateway-worker command whose output goes to a new file in the fleet's logs.
func (f *fleet) command(args ...string) (*exec.Cmd, string) {
	f.t.Helper()
	out := f.logs.Create(args[0] + "-*.log")
	cmd := workerproc.Command(args...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out.Name()
}

// run runs a gateway-worker command other than run with the fleet's --redis, --prefix and
// --shards (extra flags after them win), and returns its exit code and output.
func (f *fleet) run(name string, args ...string) (int, string) {
	f.t.Helper()
	cmd, log := f.command(append(append([]string{name}, f.baseArgs...), args...)...)
	err := cmd.Run()
	out, _ := os.ReadFile(log)
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			f.t.Fatalf("gateway-worker %s: %v", name, err)
		}
		code = ee.ExitCode()
	}
	return code, string(out)
}

// kill SIGKILLs w and waits for it to exit.
func (f *fleet) kill(w *worker) {
	f.t.Helper()
	_ = w.Kill()
	f.mu.Lock()
	f.workers = slices.DeleteFunc(f.workers, func(x *worker) bool { return x == w })
	f.mu.Unlock()
}

// stopAll sends SIGTERM to every worker still running and waits for each: a clean shutdown
// must exit 0.
func (f *fleet) stopAll() {
	f.mu.Lock()
	ws := f.workers
	f.workers = nil
	f.mu.Unlock()
	for i, err := range workerproc.Stop(30*time.Second, ws...) {
		if errors.Is(err, workerproc.ErrNotStopped) {
			f.t.Errorf("worker %s did not stop within 30s of SIGTERM", ws[i].Log())
		}
		if err != nil {
			f.t.Errorf("worker exit after SIGTERM: %v (log %s)", err, ws[i].Log())
		}
	}
}

// checkLogs fails the test for every line of any process's output (workers and commands
// alike) that reports CROSSSLOT: a script or pipeline whose keys span hash slots.
func (f *fleet) checkLogs() {
	f.t.Helper()
	logs := f.logs.Files()
	if len(logs) == 0 {
		f.t.Fatal("no process output to check")
	}
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(bytes.ToUpper(line), []byte("CROSSSLOT")) {
				f.t.Errorf("%s: %s", filepath.Base(l), line)
			}
		}
	}
}

// countLog counts the lines, over every process's output, that contain s.
func (f *fleet) countLog(s string) int { return f.logs.Count(s) }

// waitLog waits until at least n lines over every process's output contain s.
func (f *fleet) waitLog(s string, n int, within time.Duration) {
	f.t.Helper()
	f.logs.Wait(s, n, within)
}

// consumerOf is the consumer name w logged when it started.
func (f *fleet) consumerOf(w *worker) string {
	f.t.Helper()
	data, err := os.ReadFile(w.Log())
	if err != nil {
		f.t.Fatal(err)
	}
	m := regexp.MustCompile(`"msg":"worker starting"[^\n]*"consumer":"([^"]+)"`).FindSubmatch(data)
	if m == nil {
		f.t.Fatalf("%s logged no consumer name", w.Log())
	}
	return string(m[1])
}

// waitReplicas waits until the heartbeat set lists exactly the consumers of ws.
func (f *fleet) waitReplicas(ws ...*worker) {
	f.t.Helper()
	var want []string
	for _, w := range ws {
		want = append(want, f.consumerOf(w))
	}
	slices.Sort(want)
	key := stream.ReplicasKey(f.o.prefix)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := f.rdb.ZRange(context.Background(), key, 0, -1).Result()
		slices.Sort(got)
		if err == nil && slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s lists %v after 30s (err %v), want %v", key, got, err, want)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis for a state
	}
}

// subscriptions makes n subscriptions at provider (a pushsim provider name).
func (f *fleet) subscriptions(provider string, n int) []job.Subscription {
	f.t.Helper()
	host := ""
	if provider == pushsim.Generic {
		host = genericHost
	}
	out := make([]job.Subscription, n)
	for i := range out {
		s, err := f.sim.Subscribe(provider, host, f.key)
		if err != nil {
			f.t.Fatal(err)
		}
		out[i] = s
	}
	return out
}

// jobLine is the JSON of a job.
func jobLine(t testing.TB, id string, sub job.Subscription, extra map[string]any) []byte {
	t.Helper()
	m := map[string]any{"id": id, "subscription": sub, "payload": "message " + id, "ttl": 3600}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeLines writes lines to a new file of the test, one per line, and returns its path.
func (f *fleet) writeLines(name string, lines [][]byte) string {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// enqueueCLI runs `gateway-worker enqueue` on lines and requires that it enqueued them all.
func (f *fleet) enqueueCLI(name string, lines [][]byte, args ...string) {
	f.t.Helper()
	file := f.writeLines(name, lines)
	code, out := f.run("enqueue", append(args, file)...)
	if want := fmt.Sprintf("enqueued %d jobs from %s", len(lines), file); code != 0 || !strings.Contains(out, want) {
		f.t.Fatalf("gateway-worker enqueue: exit %d\n%s\nwant exit 0 and %q", code, out, want)
	}
}

// enqueue writes lines with p in batches, retrying a batch (from the first job not written)
// while Redis fails, as an upstream would, until ctx ends.
func enqueue(ctx context.Context, p *stream.Producer, lines [][]byte, batch int, every time.Duration) error {
	for i := 0; i < len(lines); {
		end := min(i+batch, len(lines))
		n, err := p.Enqueue(ctx, lines[i:end]...)
		i += n
		if err != nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
	return nil
}

// waitSettled polls the audit until every id has a terminal record, or fails after within.
func (f *fleet) waitSettled(ids []string, within time.Duration) inspect.AuditReport {
	f.t.Helper()
	return f.waitSettledOn(f.insp, ids, within)
}

// waitSettledOn is waitSettled with the audit of st.
func (f *fleet) waitSettledOn(st *inspect.Inspector, ids []string, within time.Duration) inspect.AuditReport {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		rep, _, err := st.Audit(context.Background(), ids)
		if err == nil && rep.ExactlyOne+rep.MoreThanOne == rep.Total {
			return rep
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("not every job has a terminal record after %v: total %d, exactly one %d, none %d (%v), more than one %d; last error %v",
				within, rep.Total, rep.ExactlyOne, rep.None, rep.NoneWhere, rep.MoreThanOne, err)
		}
		time.Sleep(250 * time.Millisecond) // polling Redis for a state
	}
}

// auditCLI runs `gateway-worker audit` on ids and requires exit 0 with every job at exactly
// one terminal record.
func (f *fleet) auditCLI(ids []string, args ...string) {
	f.t.Helper()
	file := f.writeLines("ids-"+fmt.Sprint(time.Now().UnixNano())+".txt", toLines(ids))
	code, out := f.run("audit", append(args, "--ids", file)...)
	if want := fmt.Sprintf("exactly one terminal:     %d", len(ids)); code != 0 || !strings.Contains(out, want) {
		f.t.Fatalf("gateway-worker audit: exit %d\n%s\nwant exit 0 and a line %q", code, out, want)
	}
}

func toLines(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// requests is every request pushsim answered, per job id, once the requests in flight have
// been answered (pushsim records a request when it answers it).
func (f *fleet) requests() map[string][]pushsim.Delivery {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for f.sim.Stats().InFlight > 0 {
		if time.Now().After(deadline) {
			f.t.Fatalf("pushsim still holds %d requests after a minute", f.sim.Stats().InFlight)
		}
		time.Sleep(20 * time.Millisecond) // polling pushsim for a state
	}
	out := map[string][]pushsim.Delivery{}
	for _, d := range f.sim.Deliveries() {
		out[d.JobID] = append(out[d.JobID], d)
	}
	return out
}

// accepted counts the accepted pushes of each job id in reqs.
func accepted(reqs map[string][]pushsim.Delivery) map[string]int {
	out := map[string]int{}
	for id, ds := range reqs {
		for _, d := range ds {
			if d.Code == "ACCEPTED" {
				out[id]++
			}
		}
	}
	return out
}

// pendingOf is how many entries consumer has pending over every shard's intake and the lanes
// of providers.
func (f *fleet) pendingOf(consumer string, providers []string) int64 {
	f.t.Helper()
	ctx := context.Background()
	var n int64
	for s := range f.store.Shards() {
		k := f.store.Keys(s)
		streams := []string{k.Intake}
		for _, p := range providers {
			streams = append(streams, k.Lane(p))
		}
		for _, st := range streams {
			sum, err := f.rdb.XPending(ctx, st, stream.Group).Result()
			if err != nil {
				f.t.Fatalf("XPENDING %s: %v", st, err)
			}
			n += sum.Consumers[consumer]
		}
	}
	return n
}

// TestEnqueueWaitFlags: bad values of the wait flags are refused before anything is read or
// written, naming the flag.
func TestEnqueueWaitFlags(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--wait-replicas", "-1", "gateway-worker enqueue: --wait-replicas must be 0 or more, got -1\n"},
		{"--wait-timeout", "0s", "gateway-worker enqueue: --wait-timeout must be positive, got 0s\n"},
	} {
		out, err := workerproc.Command("enqueue", "--redis", "redis://127.0.0.1:1/0", tc.flag, tc.value, os.DevNull).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.HasPrefix(string(out), tc.want) {
			t.Errorf("enqueue %s %s: %v, output %q; want exit 2 and %q first", tc.flag, tc.value, err, out, tc.want)
		}
	}
}
