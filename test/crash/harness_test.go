package crash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// inFlightPerProvider is the registry's max_in_flight for every provider in these tests: the
// bound on duplicate sends is this process-wide cap times the number of kills.
const inFlightPerProvider = 8

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

const genericHost = "push.example.net"

// TestMain builds the worker once; every test runs its processes from that binary.
func TestMain(m *testing.M) { os.Exit(workerproc.Main(m)) }

// cluster is a real Redis, pushsim, and worker processes of the real binary.
type cluster struct {
	t        *testing.T
	redis    *redistest.Server
	sim      *pushsim.Server
	args     []string
	regFile  string // the registry file every worker is started with
	producer *stream.Producer
	store    *inspect.Inspector
	// subscribeKey is the application server key every subscription is bound to.
	subscribeKey string

	logs *proctest.Logs // the output of every worker started, in start order

	mu      sync.Mutex
	workers []*workerproc.Worker // guarded by mu
}

// clusterOptions change what newCluster starts; the zero value is the crash tests' setup.
type clusterOptions struct {
	// registry replaces testRegistry.
	registry string
	// visibility is --visibility-timeout (default 2s).
	visibility time.Duration
	// redis are options of the redis-server.
	redis []redistest.Option
	// args are more flags for every worker.
	args []string
}

func newCluster(t *testing.T, opts ...clusterOptions) *cluster {
	t.Helper()
	var o clusterOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.registry == "" {
		o.registry = testRegistry
	}
	if o.visibility == 0 {
		o.visibility = 2 * time.Second
	}
	dir := t.TempDir()
	r := redistest.Start(t, o.redis...)
	sim := simtest.Start(t, pushsim.Config{Dir: dir, MaxDeliveries: 1_000_000})
	key := simtest.VAPIDKey(t)
	pem, _ := key.MarshalPEM()
	keyFile := filepath.Join(dir, "vapid.pem")
	regFile := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(keyFile, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(regFile, []byte(o.registry), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--redis", r.URL(), "--registry", regFile, "--vapid-key", keyFile,
		"--subject", "mailto:ops@webpush-gateway.example.com", "--ca-file", sim.CAFile(),
		"--job-id-header", "X-Job-Id", "--visibility-timeout", o.visibility.String(), "--reclaim-every", "250ms",
		"--grace", "2s", "--block", "200ms", "--log-level", "info", "--http", "127.0.0.1:0"}
	args = append(args, o.args...)
	for _, ct := range append(sim.ConnectTo(), net.JoinHostPort(genericHost, "443")+"="+sim.Addr()) {
		args = append(args, "--connect-to", ct)
	}
	c := &cluster{t: t, redis: r, sim: sim, args: args, regFile: regFile, logs: proctest.NewLogs(t, 4000)}
	c.producer = stream.NewProducer(r.Client(t), "", 1)
	c.store = inspect.New(r.Client(t), stream.Options{})
	t.Cleanup(c.stopAll)
	c.subscribeKey = key.PublicKey()
	return c
}

// startWorkers starts n more worker processes.
func (c *cluster) startWorkers(n int) {
	for range n {
		c.startWorker()
	}
}

// startWorker starts one more worker process.
func (c *cluster) startWorker() {
	c.t.Helper()
	cmd := c.spawn()
	c.mu.Lock()
	c.workers = append(c.workers, cmd)
	c.mu.Unlock()
}

// spawn starts a worker process; the binary names its consumer itself, so a restarted worker
// is always a new consumer.
func (c *cluster) spawn() *workerproc.Worker {
	c.t.Helper()
	return workerproc.Start(c.t, workerproc.Options{Logs: c.logs}, c.args...)
}

// killAndReplace SIGKILLs worker i and starts a replacement in its place.
func (c *cluster) killAndReplace(i int) {
	c.mu.Lock()
	w := c.workers[i]
	c.mu.Unlock()
	_ = w.Kill()
	nw := c.spawn()
	c.mu.Lock()
	c.workers[i] = nw
	c.mu.Unlock()
}

// stopAll sends SIGTERM to every worker and waits for it: a clean shutdown must exit 0.
func (c *cluster) stopAll() {
	c.mu.Lock()
	ws := append([]*workerproc.Worker(nil), c.workers...)
	c.workers = nil
	c.mu.Unlock()
	for _, err := range workerproc.Stop(0, ws...) {
		if err != nil {
			c.t.Errorf("worker exit after SIGTERM: %v", err)
		}
	}
}

// jobs makes n jobs over subscriptions across every provider.
func (c *cluster) jobs(n int) ([][]byte, []string) {
	c.t.Helper()
	var subs []job.Subscription
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "generic"} {
		host := ""
		if p == "generic" {
			host = genericHost
		}
		for range 20 {
			s, err := c.sim.Subscribe(p, host, c.subscribeKey)
			if err != nil {
				c.t.Fatal(err)
			}
			subs = append(subs, s)
		}
	}
	lines := make([][]byte, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("job-%05d", i)
		line, err := json.Marshal(map[string]any{
			"id": ids[i], "subscription": subs[i%len(subs)], "payload": "message " + ids[i], "ttl": 3600,
		})
		if err != nil {
			c.t.Fatal(err)
		}
		lines[i] = line
	}
	return lines, ids
}

// feed enqueues lines from a goroutine of its own, 25 every `every` (enqueueSlowly), so that
// kills land while work flows. The channel yields enqueueSlowly's error once every line is in;
// the feed stops when the test ends.
func (c *cluster) feed(lines [][]byte, every time.Duration) <-chan error {
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	fed := make(chan error, 1)
	go func() { fed <- c.enqueueSlowly(ctx, lines, 25, every) }()
	return fed
}

// enqueueSlowly feeds jobs in batches so that kills land while work is flowing.
func (c *cluster) enqueueSlowly(ctx context.Context, lines [][]byte, batch int, every time.Duration) error {
	for i := 0; i < len(lines); i += batch {
		end := min(i+batch, len(lines))
		for {
			_, err := c.producer.Enqueue(ctx, lines[i:end]...)
			if err == nil {
				break
			}
			// Redis may be down in the Redis-kill test: the producer retries like an upstream would.
			select {
			case <-ctx.Done():
				return err
			case <-time.After(50 * time.Millisecond):
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
	return nil
}

// waitQuiet polls the audit until every id has a terminal record, or the deadline passes.
func (c *cluster) waitQuiet(ids []string, deadline time.Duration) inspect.AuditReport {
	c.t.Helper()
	end := time.Now().Add(deadline)
	var rep inspect.AuditReport
	for {
		var err error
		rep, _, err = c.store.Audit(context.Background(), ids)
		if err == nil && rep.ExactlyOne+rep.MoreThanOne == rep.Total {
			return rep
		}
		if time.Now().After(end) {
			c.t.Fatalf("not quiet after %s: %+v (last error %v)", deadline, summarize(rep), err)
		}
		time.Sleep(200 * time.Millisecond) // polling Redis for a state, not waiting for an event
	}
}

// requireOneRecordEach waits until every id has its terminal record (within deadline) and fails
// unless each has exactly one.
func (c *cluster) requireOneRecordEach(ids []string, deadline time.Duration) {
	c.t.Helper()
	rep := c.waitQuiet(ids, deadline)
	if rep.ExactlyOne != len(ids) || rep.None != 0 || rep.MoreThanOne != 0 {
		c.t.Fatalf("audit: %s; want all %d with exactly one terminal record", summarize(rep), len(ids))
	}
}

func summarize(r inspect.AuditReport) string {
	return fmt.Sprintf("total %d exactly-one %d none %d (%v) more-than-one %d", r.Total, r.ExactlyOne, r.None, r.NoneWhere, r.MoreThanOne)
}

// duplicates counts accepted sends beyond the first per job id, and fails on an accepted send
// that carried no job id.
func (c *cluster) duplicates() (dups int, delivered map[string]int) {
	delivered = map[string]int{}
	for _, d := range c.sim.Deliveries() {
		if d.Code != "ACCEPTED" {
			continue
		}
		if d.JobID == "" {
			c.t.Errorf("an accepted push without X-Job-Id: %s", d.Provider)
			continue
		}
		delivered[d.JobID]++
	}
	for _, n := range delivered {
		dups += n - 1
	}
	return dups, delivered
}

// auditCLI runs `gateway-worker audit` on ids, as an operator would, and requires its verdict:
// exit 0 and every job with exactly one terminal record.
func (c *cluster) auditCLI(ids []string) {
	c.t.Helper()
	file := filepath.Join(c.t.TempDir(), "ids.txt")
	if err := os.WriteFile(file, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	out, err := workerproc.Command("audit", "--redis", c.redis.URL(), "--ids", file).CombinedOutput()
	if err != nil {
		c.t.Fatalf("gateway-worker audit: %v\n%s", err, out)
	}
	want := fmt.Sprintf("exactly one terminal:     %d", len(ids))
	if !strings.Contains(string(out), want) {
		c.t.Fatalf("gateway-worker audit printed:\n%s\nwant a line %q", out, want)
	}
}
