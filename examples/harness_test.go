// Package examples_test runs the Python and Node examples as an upstream would: against a real
// redis-server (with a replica, for WAIT), a real gateway-worker sending to pushsim, the
// producers enqueueing and the consumers reading the outcomes back. It needs python3 with
// redis-py (Debian: python3-redis) and node with examples/node's packages (npm ci);
// scripts/install-deps.sh installs both.
package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/workerproc"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// shards is the shard count of the tests' prefix: enough that the hashing is checked.
const shards = 3

const testRegistry = `
version: 1
defaults:
  max_in_flight: 8
  rate: 10000
  burst: 1000
  timeout: 5s
  connect_timeout: 2s
  tls_timeout: 2s
  response_header_timeout: 4s
` + registrytest.EveryProvider

// workerVersion is what TestMain stamps the gateway-worker binary with, built once, as `make
// build` stamps the Makefile's VERSION.
const workerVersion = "v0.1.0-examplestest"

func TestMain(m *testing.M) { os.Exit(workerproc.Main(m, workerproc.Version(workerVersion))) }

// python is a python3 that imports redis-py: the one on PATH, else Debian's (python3-redis
// installs for /usr/bin/python3, which another python3 earlier on PATH may shadow).
func python(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(c)
		if err != nil {
			tried = append(tried, c+" (not found)")
			continue
		}
		if out, err := exec.Command(p, "-c", "import redis").CombinedOutput(); err != nil {
			tried = append(tried, fmt.Sprintf("%s (%s)", p, strings.TrimSpace(lastLine(string(out)))))
			continue
		}
		return p
	}
	t.Fatalf("no python3 with redis-py: tried %s; install it (Debian: apt-get install python3-redis; scripts/install-deps.sh does it)", strings.Join(tried, ", "))
	return ""
}

// node is node, with examples/node's packages installed.
func node(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH (%v); the Node examples need Node.js 18 or later", err)
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "ioredis", "package.json")); err != nil {
		t.Fatalf("examples/node has no node_modules/ioredis (%v); run `npm ci --prefix examples/node` (scripts/install-deps.sh does it)", err)
	}
	return p
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// env is a Redis master with one replica, pushsim, and one worker of the real binary; python
// and node are the interpreters of the tests that run the examples.
type env struct {
	t       *testing.T
	master  *redistest.Server
	replica *redistest.Server
	rdb     *redis.Client
	sim     *pushsim.Server
	appKey  string // the application server key subscriptions are made with
	dir     string
	python  string
	node    string
	// args are the worker's command line; httpAddr is where its listener (metrics, health)
	// took its port, once it runs.
	args     []string
	httpAddr string
}

// newEnv is an env with its worker running.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvWithoutWorker(t)
	e.startWorker()
	return e
}

// newEnvWithoutWorker is an env whose worker starts only at startWorker, so that a test can
// leave jobs waiting in Redis first.
func newEnvWithoutWorker(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.master, e.replica = startReplicated(t)
	e.rdb = e.master.Client(t)

	e.sim = simtest.Start(t, pushsim.Config{Dir: e.dir, MaxDeliveries: 1_000_000})
	key := simtest.VAPIDKey(t)
	e.appKey = key.PublicKey()
	pem, _ := key.MarshalPEM()
	keyFile := filepath.Join(e.dir, "vapid.pem")
	regFile := filepath.Join(e.dir, "registry.yaml")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(regFile, []byte(testRegistry), 0o644); err != nil {
		t.Fatal(err)
	}
	e.args = []string{"run", "--redis", e.master.URL(), "--shards", fmt.Sprint(shards), "--registry", regFile,
		"--vapid-key", keyFile, "--subject", "mailto:ops@webpush-gateway.example.com", "--ca-file", e.sim.CAFile(),
		"--grace", "2s", "--block", "200ms", "--log-level", "info", "--http", "127.0.0.1:0"}
	for _, ct := range e.sim.ConnectTo() {
		e.args = append(e.args, "--connect-to", ct)
	}
	return e
}

// startWorker starts the env's worker, and stops it when the test ends.
func (e *env) startWorker() {
	e.t.Helper()
	w := workerproc.Start(e.t, workerproc.Options{Logs: proctest.NewLogs(e.t, 4000)}, e.args...)
	e.t.Cleanup(func() {
		if err := w.Stop(0); err != nil {
			e.t.Errorf("worker exit after SIGTERM: %v", err)
		}
	})
	e.httpAddr = w.HTTPAddr(e.t, 30*time.Second)
}

// startReplicated starts a Redis master and a replica of it, and waits for their link.
func startReplicated(t *testing.T) (master, replica *redistest.Server) {
	t.Helper()
	master = redistest.Start(t)
	host, port, _ := net.SplitHostPort(master.Addr())
	replica = redistest.Start(t, redistest.WithConfig("replicaof", host, port))
	waitFor(t, 20*time.Second, "the replica's link to its master", func() string {
		info, err := replica.Client(t).Info(context.Background(), "replication").Result()
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(info, "master_link_status:up") {
			return "master_link_status is not up"
		}
		return ""
	})
	return master, replica
}

// waitFor polls check (which says what is not so yet, "" when it is) until it holds or within
// passes, and then fails the test with check's last word.
func waitFor(t *testing.T, within time.Duration, what string, check func() string) {
	t.Helper()
	end := time.Now().Add(within)
	for {
		why := check()
		if why == "" {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("waited %s for %s: %s", within, what, why)
		}
		time.Sleep(100 * time.Millisecond) // polling Redis for a state, not waiting for an event
	}
}

// subscriptions makes n subscriptions, spread over the four push services.
func (e *env) subscriptions(n int) []map[string]any {
	e.t.Helper()
	providers := []string{pushsim.FCM, pushsim.Autopush, pushsim.Apple, pushsim.WNS}
	out := make([]map[string]any, n)
	for i := range n {
		s, err := e.sim.Subscribe(providers[i%len(providers)], "", e.appKey)
		if err != nil {
			e.t.Fatal(err)
		}
		var m map[string]any
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &m)
		out[i] = m
	}
	return out
}

// jobsFile writes one job per id, each to subs[i % len(subs)], and returns the file. A job of
// an id bulk says is one (class "bulk"); the others name no class (transactional). bulk nil:
// none is.
func (e *env) jobsFile(name string, ids []string, subs []map[string]any, bulk func(id string) bool) string {
	e.t.Helper()
	var b bytes.Buffer
	for i, id := range ids {
		j := map[string]any{"id": id, "subscription": subs[i%len(subs)], "payload": "hello " + id, "ttl": 600}
		if bulk != nil && bulk(id) {
			j["class"] = "bulk"
		}
		line, err := json.Marshal(j)
		if err != nil {
			e.t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return path
}

// run runs an example (python or node, its script under examples/, its arguments) and returns
// its exit code, standard output and standard error.
func (e *env) run(interp, script string, args ...string) (int, string, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, interp, append([]string{script}, args...)...)
	// campaign.py imports producer.py: no __pycache__ left in the source tree.
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("%s %s: %v", interp, script, err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// mustRun is run, failing the test unless the example exits 0.
func (e *env) mustRun(interp, script string, args ...string) string {
	e.t.Helper()
	code, stdout, stderr := e.run(interp, script, args...)
	if code != 0 {
		e.t.Fatalf("%s %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", filepath.Base(interp), script, strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout
}

// record is one entry of a ledger or gone stream, with the shard it is in.
type record struct {
	stream, entry string
	shard         int
	fields        map[string]any
}

// records reads every entry of the ledger (kind "results") or gone ("gone") stream of every
// shard.
func (e *env) records(kind string) []record {
	e.t.Helper()
	var out []record
	for s := range shards {
		key := fmt.Sprintf("wp:{%d}:%s", s, kind)
		msgs, err := e.rdb.XRange(context.Background(), key, "-", "+").Result()
		if err != nil {
			e.t.Fatalf("XRANGE %s: %v", key, err)
		}
		for _, m := range msgs {
			out = append(out, record{stream: key, entry: m.ID, shard: s, fields: m.Values})
		}
	}
	return out
}

// event is one JSON line a consumer prints per record it handles; Campaign and Recipient are
// there for a campaign recipient's records.
type event struct {
	Stream, Entry, ID, Code, Kind, Endpoint string
	Campaign, Recipient                     string
	Had                                     bool
}

func parseEvents(t *testing.T, who, out string) []event {
	t.Helper()
	var evs []event
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s printed a line that is not an event: %q (%v)", who, sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// store is the consumers' store file.
type store struct {
	Subscriptions map[string]any    `json:"subscriptions"`
	Outcomes      map[string]string `json:"outcomes"`
}

func readStore(t *testing.T, path string) store {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s store
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}
