package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// embeddedWait bounds every wait for the worker in these tests; the whole file runs in a few
// seconds, so reaching it means something is stuck.
const embeddedWait = 15 * time.Second

// embeddedEnv is the demo's wiring with the embedded Redis in place of redis-server: the
// clients from stream.Connect, a Store on its own prefix, pushsim behind a real adapter.Sender.
type embeddedEnv struct {
	t      *testing.T
	main   redis.UniversalClient
	store  *stream.Store
	sim    *pushsim.Server
	sender *adapter.Sender
	reg    *providers.Registry
	key    *vapid.Key
	logs   *embeddedLogs
}

// embeddedPrefix is the key prefix of these tests; any prefix works, this one shows that a
// non-default prefix reaches every script.
const embeddedPrefix = "wpembed"

func newEmbeddedEnv(t *testing.T) *embeddedEnv {
	t.Helper()
	e := &embeddedEnv{t: t, logs: &embeddedLogs{}}
	// Registered first, so it runs last: the worker, the clients, pushsim and the embedded
	// server must all have stopped their goroutines by then.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	// Registered before the worker's cleanup, so it runs after the worker has stopped: a Redis
	// command the embedded server answers differently shows as a warning or error long before
	// it shows as a lost job.
	t.Cleanup(func() {
		logs := e.logs.String()
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				t.Errorf("worker logged: %s", l)
			}
		}
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
		}
	})
	r, err := startEmbeddedRedis()
	if err != nil {
		t.Fatalf("startEmbeddedRedis: %v", err)
	}
	t.Cleanup(r.Stop)

	// The same options as the demo: CLIENT SETNAME on every connection and a blocking pool.
	main, blocking, err := stream.Connect(r.URL(), stream.ConnectOptions{ClientName: "gateway-demo", BlockingPoolSize: 16})
	if err != nil {
		t.Fatalf("stream.Connect(%s): %v", r.URL(), err)
	}
	t.Cleanup(func() { main.Close(); blocking.Close() })
	e.main = main
	e.store = stream.New(main, blocking, stream.Options{Prefix: embeddedPrefix, Consumer: "demo-1"})

	if e.sim, err = pushsim.Start(pushsim.Config{Dir: t.TempDir()}); err != nil {
		t.Fatalf("pushsim.Start: %v", err)
	}
	t.Cleanup(func() { e.sim.Close() })
	if e.reg, err = providers.Parse("registry.yaml (built in)", webpushgateway.DefaultRegistry); err != nil {
		t.Fatal(err)
	}
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: "mailto:demo@webpush-gateway.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	connectTo, err := adapter.ParseConnectTo(append(e.sim.ConnectTo(), net.JoinHostPort(genericHost, "443")+"="+e.sim.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	e.sender, err = adapter.New(adapter.Config{Registry: e.reg, Signer: signer, ConnectTo: connectTo, RootCAs: e.sim.CertPool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.sender.Close)
	if e.key, err = vapid.GenerateKey("default"); err != nil {
		t.Fatal(err)
	}
	return e
}

// config is the demo's worker configuration with loop periods short enough for a test.
func (e *embeddedEnv) config() dispatch.Config {
	return dispatch.Config{
		Store: e.store, Sender: e.sender, Registry: e.reg, Keys: map[string]*vapid.Key{"default": e.key},
		Block: 50 * time.Millisecond, PromoteEvery: 20 * time.Millisecond, ReclaimEvery: 50 * time.Millisecond,
		Grace: 5 * time.Second, StartupTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// run starts dispatch.Run with cfg; the returned function stops it and fails the test if Run
// ended with an error (a startup the embedded Redis could not finish shows here).
func (e *embeddedEnv) run(cfg dispatch.Config) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dispatch.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("dispatch.Run: %v", err)
				}
			case <-time.After(embeddedWait):
				e.t.Errorf("dispatch.Run did not return within %s of its cancellation", embeddedWait)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// subscribe makes a pushsim subscription signed for the env's key.
func (e *embeddedEnv) subscribe(provider, host string) pushsim.Subscription {
	e.t.Helper()
	s, err := e.sim.Subscribe(provider, host, e.key.PublicKey())
	if err != nil {
		e.t.Fatalf("Subscribe(%s): %v", provider, err)
	}
	return s
}

// enqueue writes jobs with the producer upstreams use.
func (e *embeddedEnv) enqueue(jobs ...[]byte) {
	e.t.Helper()
	if n, err := stream.NewProducer(e.main, embeddedPrefix, 1).Enqueue(context.Background(), jobs...); err != nil {
		e.t.Fatalf("Enqueue: %d of %d written: %v", n, len(jobs), err)
	}
}

// waitTerminal waits until n jobs have a ledger or dead record, as the demo does.
func (e *embeddedEnv) waitTerminal(n int) {
	e.t.Helper()
	var last map[string]int64
	embeddedPoll(e.t, fmt.Sprintf("%d terminal records", n), func() bool {
		c, err := e.store.Counts(context.Background())
		if err != nil {
			e.t.Fatalf("Counts: %v", err)
		}
		last = c
		return int(c["results"]+c["dead"]) >= n
	}, func() string { return fmt.Sprintf("counts %v", last) })
}

// embeddedPoll calls cond every few milliseconds until it holds, failing the test after
// embeddedWait with what and the state show gives.
func embeddedPoll(t *testing.T, what string, cond func() bool, show func() string) {
	t.Helper()
	deadline := time.Now().Add(embeddedWait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (%s)", embeddedWait, what, show())
		}
		<-tick.C
	}
}

// results are the ledger records by job id.
func (e *embeddedEnv) results() map[string]stream.Result {
	e.t.Helper()
	out := map[string]stream.Result{}
	if err := e.store.Results(context.Background(), func(r stream.Result) {
		if _, dup := out[r.ID]; dup {
			e.t.Errorf("job %s has two ledger records", r.ID)
		}
		out[r.ID] = r
	}); err != nil {
		e.t.Fatalf("Results: %v", err)
	}
	return out
}

// dead are the dead-letter records.
func (e *embeddedEnv) dead() []stream.DeadRecord {
	e.t.Helper()
	var out []stream.DeadRecord
	if err := e.store.DeadRecords(context.Background(), func(d stream.DeadRecord) { out = append(out, d) }); err != nil {
		e.t.Fatalf("DeadRecords: %v", err)
	}
	return out
}

func embeddedJob(t *testing.T, id string, sub pushsim.Subscription, extra ...any) []byte {
	t.Helper()
	m := map[string]any{"id": id, "subscription": sub, "payload": "hello " + id, "ttl": 3600, "urgency": "normal"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// embeddedLogs collects the worker's log lines from its many goroutines.
type embeddedLogs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *embeddedLogs) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *embeddedLogs) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestEmbeddedRedisServesLoopbackExpiresKeysAndStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // Stop ends the TTL goroutine and every connection
	r, err := startEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	u := r.URL()
	addr, ok := strings.CutPrefix(u, "redis://")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("URL %q, want redis://127.0.0.1:<port>", u)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING %s: %v", u, err)
	}
	// The sent and gone marks are SET PX: they must run out on the clock, as on redis-server.
	if err := c.Set(ctx, "mark", "1", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	embeddedPoll(t, "a 50 ms key to expire", func() bool { return c.Exists(ctx, "mark").Val() == 0 },
		func() string { return "PTTL " + c.PTTL(ctx, "mark").Val().String() })
	r.Stop()
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after Stop", addr)
	}
}

// TestEmbeddedRedisRunsTheDemoPipeline is the demo on the embedded Redis: a burst across every
// provider, one expired subscription and one invalid job, each ending in exactly one terminal
// record.
func TestEmbeddedRedisRunsTheDemoPipeline(t *testing.T) {
	e := newEmbeddedEnv(t)
	var subs []pushsim.Subscription
	for _, p := range pushsim.Providers() {
		host := ""
		if p == pushsim.Generic {
			host = genericHost
		}
		subs = append(subs, e.subscribe(p, host))
	}
	gone := e.subscribe(pushsim.Autopush, "")
	e.sim.Expire(gone.Endpoint)

	const accepted = 49
	var jobs [][]byte
	for i := range accepted {
		jobs = append(jobs, embeddedJob(t, fmt.Sprintf("demo-%02d", i), subs[i%len(subs)]))
	}
	jobs = append(jobs, embeddedJob(t, "demo-gone", gone), embeddedJob(t, "demo-bad-ttl", subs[0], "ttl", -5))

	stop := e.run(e.config())
	e.enqueue(jobs...)
	e.waitTerminal(len(jobs))
	stop()

	res := e.results()
	codes := map[string]int{}
	perProvider := map[string]int{}
	for _, r := range res {
		codes[r.Code]++
		perProvider[r.Provider]++
	}
	if codes["ACCEPTED"] != accepted || codes["GONE"] != 1 || len(res) != accepted+1 {
		t.Errorf("ledger codes %v (%d records), want %d ACCEPTED and 1 GONE", codes, len(res), accepted)
	}
	if r := res["demo-gone"]; r.Code != "GONE" || r.Provider != "autopush" {
		t.Errorf("demo-gone: %+v, want GONE from autopush", r)
	}
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "fallback"} {
		if perProvider[p] == 0 {
			t.Errorf("no ledger record from %s (per provider: %v)", p, perProvider)
		}
	}
	d := e.dead()
	if len(d) != 1 || d[0].ID != "demo-bad-ttl" || d[0].Code != "INVALID_JOB" || d[0].Reason != "ttl: must be at least 0, got -5" {
		t.Errorf("dead records %+v, want demo-bad-ttl INVALID_JOB %q", d, "ttl: must be at least 0, got -5")
	}
	decrypted := 0
	for _, dl := range e.sim.Deliveries() {
		if dl.Code == "ACCEPTED" && strings.HasPrefix(string(dl.Plaintext), "hello demo-") {
			decrypted++
		}
	}
	if decrypted != accepted {
		t.Errorf("pushsim decrypted %d messages, want %d", decrypted, accepted)
	}
	c, err := e.store.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c["intake"] != 0 || c["pending"] != 0 || c["delayed"] != 0 {
		t.Errorf("counts %v: intake, pending and delayed should be empty", c)
	}
	// go-redis names every connection (HELLO, then CLIENT SETNAME), as the demo asks.
	if name, err := e.main.Do(context.Background(), "CLIENT", "GETNAME").Text(); err != nil || name != "gateway-demo" {
		t.Errorf("CLIENT GETNAME: %q (%v), want gateway-demo", name, err)
	}
	// A Store that never ran Setup finds the lanes by SCAN MATCH with an escaped pattern, as the
	// start-up check for orphan lanes does.
	lanes, err := stream.New(e.main, nil, stream.Options{Prefix: embeddedPrefix}).Lanes(context.Background(), 0)
	if want := []string{"apple", "autopush", "fallback", "fcm", "wns"}; err != nil || !slices.Equal(lanes, want) {
		t.Errorf("Lanes: %v (%v), want %v", lanes, err, want)
	}
}

// TestEmbeddedRedisRetriesThroughTheDelayedSet sends a job into a failing provider: its retry
// goes through the delayed set (cjson in to_delayed.lua and promote.lua) and back to the lane.
func TestEmbeddedRedisRetriesThroughTheDelayedSet(t *testing.T) {
	e := newEmbeddedEnv(t)
	sub := e.subscribe(pushsim.FCM, "")
	if err := e.sim.SetFault(pushsim.FCM, pushsim.Fault{Kind: pushsim.Fail, Status: 500}); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.Backoff = dispatch.Backoff{Base: 50 * time.Millisecond, Cap: 100 * time.Millisecond, MaxRetries: 3}
	e.run(cfg)
	e.enqueue(embeddedJob(t, "retry-1", sub))

	embeddedPoll(t, "the first, failed, send of retry-1", func() bool { return len(e.sim.DeliveriesFor(sub.Endpoint)) > 0 },
		func() string { return "pushsim saw no request" })
	if err := e.sim.SetFault(pushsim.FCM, pushsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	e.waitTerminal(1)
	r := e.results()["retry-1"]
	if r.Code != "ACCEPTED" || r.Attempt < 1 {
		t.Errorf("retry-1: %+v, want ACCEPTED on a retry (attempt >= 1)", r)
	}
	if d := e.dead(); len(d) != 0 {
		t.Errorf("dead records %+v, want none", d)
	}
}

// TestEmbeddedRedisReclaimsADeadConsumersEntries leaves intake entries pending under a consumer
// that never comes back: the reclaimer (XAUTOCLAIM and XPENDING in reclaim.lua) takes them
// over and they are delivered.
func TestEmbeddedRedisReclaimsADeadConsumersEntries(t *testing.T) {
	e := newEmbeddedEnv(t)
	sub := e.subscribe(pushsim.Apple, "")
	e.enqueue(embeddedJob(t, "orphan-1", sub), embeddedJob(t, "orphan-2", sub))

	ctx := context.Background()
	ghost := stream.New(e.main, e.main, stream.Options{Prefix: embeddedPrefix, Consumer: "ghost"})
	if err := ghost.Setup(ctx, []string{"apple"}); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if got, err := ghost.ReadIntake(ctx, 0, 10, 0); err != nil || len(got) != 2 {
		t.Fatalf("ghost read %d intake entries (%v), want 2", len(got), err)
	}

	cfg := e.config()
	cfg.VisibilityTimeout = 100 * time.Millisecond
	stop := e.run(cfg)
	e.waitTerminal(2)
	stop()

	res := e.results()
	for _, id := range []string{"orphan-1", "orphan-2"} {
		if res[id].Code != "ACCEPTED" {
			t.Errorf("%s: %+v, want ACCEPTED", id, res[id])
		}
	}
	c, err := e.store.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c["pending"] != 0 || c["intake"] != 0 {
		t.Errorf("counts %v: nothing should be left pending", c)
	}
	if !strings.Contains(e.logs.String(), "entries reclaimed") {
		t.Errorf("the worker did not report reclaiming the entries")
	}
}

// TestEmbeddedRedisJanitorNeedsASeenTime pins the one difference from redis-server the worker
// meets (see embeddedRedis): miniredis records no seen time on XREADGROUP, so XINFO CONSUMERS
// says idle -1 and the janitor keeps the consumer. Given a seen time (XCLAIM of an id nobody
// holds sets it and changes nothing else), clean_consumer.lua removes the departed consumer,
// so everything else the janitor relies on works here.
func TestEmbeddedRedisJanitorNeedsASeenTime(t *testing.T) {
	e := newEmbeddedEnv(t)
	ctx := context.Background()
	e.enqueue(embeddedJob(t, "left-behind", e.subscribe(pushsim.FCM, "")))
	ghost := stream.New(e.main, e.main, stream.Options{Prefix: embeddedPrefix, Consumer: "ghost"})
	if err := ghost.Setup(ctx, []string{"fcm"}); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	in := e.store.IntakeStream(0)
	// The ghost reads the job and dies; the worker reclaims it, which leaves the ghost with
	// nothing pending: a consumer the janitor should remove once it has been idle long enough.
	if got, err := ghost.ReadIntake(ctx, 0, 1, 0); err != nil || len(got) != 1 {
		t.Fatalf("ghost read %d intake entries (%v), want 1", len(got), err)
	}
	idle := func() (time.Duration, bool) {
		cs, err := e.main.XInfoConsumers(ctx, in, stream.Group).Result()
		if err != nil {
			t.Fatalf("XINFO CONSUMERS: %v", err)
		}
		for _, c := range cs {
			if c.Name == "ghost" {
				return c.Idle, true
			}
		}
		return 0, false
	}
	if d, ok := idle(); !ok {
		t.Fatal("ghost is not a consumer of the intake group after its read")
	} else if d >= 0 {
		t.Fatalf("ghost's idle is %v: miniredis now tracks it; drop the note on embeddedRedis and this XCLAIM", d)
	}
	if err := e.main.Do(ctx, "XCLAIM", in, stream.Group, "ghost", "0", "0-0").Err(); err != nil {
		t.Fatalf("XCLAIM: %v", err)
	}

	cfg := e.config()
	cfg.VisibilityTimeout = 50 * time.Millisecond
	cfg.JanitorEvery = 20 * time.Millisecond
	cfg.JanitorIdle = 100 * time.Millisecond
	stop := e.run(cfg)
	e.waitTerminal(1)
	embeddedPoll(t, "the janitor to remove ghost", func() bool { _, ok := idle(); return !ok },
		func() string { d, _ := idle(); return fmt.Sprintf("ghost idle %v", d) })
	stop() // the janitor logs after its script has run
	if !strings.Contains(e.logs.String(), "idle consumers removed") {
		t.Errorf("the worker did not report removing ghost")
	}
}
