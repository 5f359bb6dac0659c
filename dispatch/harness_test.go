package dispatch

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Every test stops its workers, servers and clients: a loop, send or connection goroutine
// still running at the end is a leak.
//
// A test with a redis-server and pushsim of its own (newEnv) mostly waits on them, so it calls
// t.Parallel. The tests that measure rates or concurrency on the wall clock, or bound a timing
// within a second (most of isolation_test.go), and those that look at every goroutine of the
// process (redialsEnded) do not: they run one at a time, before the parallel ones start.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	subject     = "mailto:ops@webpush-gateway.example.com"
	genericHost = "push.example.net"
	prefix      = "wp"
	// waitLimit bounds every wait for an asynchronous outcome; reaching it fails the test.
	waitLimit = 20 * time.Second
)

// clock is the injected time source shared by the worker, the signer, the classifier and
// pushsim, so JWT expiry checks agree with the stepped time. A wall clock is the real time, for
// the tests that measure rates; it cannot be stepped.
type clock struct {
	mu   sync.Mutex
	now  time.Time
	wall bool // immutable
}

func (c *clock) Now() time.Time {
	if c.wall {
		return time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Step(d time.Duration) {
	if c.wall {
		panic("clock: a wall clock cannot be stepped")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer collects the worker's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is one redis-server, one pushsim and a Sender wired to it under the real provider host
// names, plus what a test needs to look at Redis.
type env struct {
	t      testing.TB
	redis  *redistest.Server
	store  *stream.Store
	prod   *stream.Producer
	sim    *pushsim.Server
	proxy  *proxytest.Proxy // nil unless envOptions.viaProxy
	sender *adapter.Sender
	reg    *providers.Registry
	clock  *clock
	key    *vapid.Key
	logs   *syncBuffer
	shards int
	opts   envOptions

	// Redis access for assertions and for writing entries no producer would.
	xrange  func(key string) []record
	zscore  func(key, member string) (float64, bool)
	xlen    func(key string) int64
	pending func(stream string) int64
	xadd    func(key string, fields ...string)
	// consumers are the consumer names of a stream's group.
	consumers func(stream string) []string

	mu   sync.Mutex
	subs []jobfmt.Subscription // guarded by mu; secrets no log line may carry
}

type envOptions struct {
	shards      int
	fcmInFlight int // max_in_flight of fcm; 0 keeps the shipped registry's
	// registry replaces the shipped registry.yaml (fcmInFlight is then ignored).
	registry string
	// wallClock runs the worker and pushsim on the real clock, for tests that measure rates
	// and timeouts; the stepped clock cannot be used by them.
	wallClock bool
	// connectTo adds connect-to overrides ("host:port=addr:port") for hosts pushsim does not
	// serve.
	connectTo []string
	// redis configures the env's redis-server (DEBUG SLEEP needs enable-debug-command).
	redis []redistest.Option
	// viaProxy sends every provider through a proxytest CONNECT proxy (env.proxy).
	viaProxy bool
}

// paths are the two ways out the isolation tests run both: direct, and through a proxy.
var paths = []struct {
	name     string
	viaProxy bool
}{{"direct", false}, {"proxy", true}}

// record is one stream entry: its fields plus "_id", the entry id.
type record map[string]string

func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	if testing.Short() {
		// `go test -short ./dispatch/` runs the decision tests alone, in a second; make test runs
		// everything, these included.
		t.Skip("runs a real redis-server and pushsim; run without -short")
	}
	if opts.shards == 0 {
		opts.shards = 1
	}
	e := &env{t: t, shards: opts.shards, opts: opts, logs: &syncBuffer{}}
	e.clock = &clock{now: time.Now().Truncate(time.Millisecond), wall: opts.wallClock}

	e.redis = redistest.Start(t, opts.redis...)
	rdb := e.redis.Client(t)
	e.store = e.newStore("w1")
	e.prod = stream.NewProducer(rdb, prefix, opts.shards)
	ctx := context.Background()
	e.xrange = func(key string) []record {
		msgs, err := rdb.XRange(ctx, key, "-", "+").Result()
		if err != nil {
			t.Fatalf("XRANGE: %v", err)
		}
		out := make([]record, 0, len(msgs))
		for _, m := range msgs {
			r := record{"_id": m.ID}
			for k, v := range m.Values {
				r[k] = fmt.Sprint(v)
			}
			out = append(out, r)
		}
		return out
	}
	e.zscore = func(key, member string) (float64, bool) {
		s, err := rdb.ZScore(ctx, key, member).Result()
		return s, err == nil
	}
	e.xlen = func(key string) int64 {
		n, err := rdb.XLen(ctx, key).Result()
		if err != nil {
			t.Fatalf("XLEN: %v", err)
		}
		return n
	}
	e.pending = func(stream string) int64 {
		p, err := rdb.XPending(ctx, stream, "gateway").Result()
		if err != nil {
			return 0 // no stream or group yet: nothing pending
		}
		return p.Count
	}
	e.xadd = func(key string, fields ...string) {
		args := []any{"XADD", key, "*"}
		for _, f := range fields {
			args = append(args, f)
		}
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("XADD: %v", err)
		}
	}

	e.consumers = func(stream string) []string {
		cs, err := rdb.XInfoConsumers(ctx, stream, "gateway").Result()
		if err != nil {
			t.Fatalf("XINFO CONSUMERS: %v", err)
		}
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		return names
	}

	sim, err := pushsim.Start(pushsim.Config{Dir: t.TempDir(), Now: e.clock.Now})
	if err != nil {
		t.Fatalf("pushsim.Start: %v", err)
	}
	t.Cleanup(func() { sim.Close() })
	e.sim = sim

	data, err := os.ReadFile("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if opts.registry != "" {
		data = []byte(opts.registry)
	} else if opts.fcmInFlight > 0 {
		data = bytes.Replace(data, []byte("max_in_flight: 512"), []byte("max_in_flight: "+strconv.Itoa(opts.fcmInFlight)), 1)
	}
	if e.reg, err = providers.Parse("registry.yaml", data); err != nil {
		t.Fatalf("registry: %v", err)
	}
	if opts.viaProxy {
		e.proxy = proxytest.Start(t, proxytest.Config{})
	}
	e.sender = e.senderFor(e.reg)
	if e.key, err = vapid.GenerateKey("default"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.checkLogs) // runs after every worker of the test has stopped
	return e
}

// senderFor is a Sender for reg that reaches pushsim under every provider's host name, as the
// env's own does.
func (e *env) senderFor(reg *providers.Registry) *adapter.Sender {
	e.t.Helper()
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: subject, Now: e.clock.Now})
	if err != nil {
		e.t.Fatal(err)
	}
	sim := e.sim
	connectTo, err := adapter.ParseConnectTo(append(append(sim.ConnectTo(), net.JoinHostPort(genericHost, "443")+"="+sim.Addr()), e.opts.connectTo...))
	if err != nil {
		e.t.Fatal(err)
	}
	var proxy *adapter.Proxy
	if e.proxy != nil {
		if proxy, err = adapter.ParseProxy(adapter.ProxyOptions{Spec: e.proxy.URL()}); err != nil {
			e.t.Fatal(err)
		}
	}
	s, err := adapter.NewSender(adapter.Config{
		Registry: reg, Signer: signer, ConnectTo: connectTo, RootCAs: sim.CertPool(), Now: e.clock.Now,
		JobIDHeader: "X-Job-Id", Proxy: proxy,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// newStore is a Store for consumer on the env's Redis, with its own clients.
func (e *env) newStore(consumer string) *stream.Store {
	s := stream.New(e.redis.Client(e.t), e.redis.Client(e.t), stream.Options{Prefix: prefix, Shards: e.shards, Consumer: consumer,
		CommitLinger: stream.DefaultCommitLinger})
	e.t.Cleanup(func() { s.Close() })
	return s
}

// checkLogs fails the test when a log line carries a subscription secret, and shows the log
// of a failed test.
func (e *env) checkLogs() {
	logs := e.logs.String()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.subs {
		secrets := []string{s.Keys.P256dh, s.Keys.Auth}
		if i := strings.Index(s.Endpoint, "://"); i >= 0 {
			if j := strings.IndexAny(s.Endpoint[i+3:], "/?"); j >= 0 {
				secrets = append(secrets, s.Endpoint[i+3+j:])
			}
		}
		for _, sec := range secrets {
			if len(sec) > 4 && strings.Contains(logs, sec) {
				e.t.Errorf("the worker's log carries a subscription secret")
			}
		}
	}
	if e.t.Failed() {
		e.t.Logf("worker log:\n%s", logs)
	}
}

// subscribe makes a pushsim subscription for provider (pushsim's name) with key.
func (e *env) subscribe(provider string, key *vapid.Key) jobfmt.Subscription {
	e.t.Helper()
	host := ""
	if provider == pushsim.Generic {
		host = genericHost
	}
	return e.subscribeAt(provider, host, key)
}

// subscribeAt makes a pushsim subscription for provider on host ("" for the provider's usual
// one).
func (e *env) subscribeAt(provider, host string, key *vapid.Key) jobfmt.Subscription {
	e.t.Helper()
	ps, err := e.sim.Subscribe(provider, host, key.PublicKey())
	if err != nil {
		e.t.Fatalf("Subscribe(%s): %v", provider, err)
	}
	var s jobfmt.Subscription
	s.Endpoint, s.Keys.P256dh, s.Keys.Auth = ps.Endpoint, ps.Keys.P256dh, ps.Keys.Auth
	e.mu.Lock()
	e.subs = append(e.subs, s)
	e.mu.Unlock()
	return s
}

// job is a job's JSON: id, subscription, payload, then extra fields as name, value pairs.
func job(id string, sub jobfmt.Subscription, payload string, extra ...any) []byte {
	m := map[string]any{"id": id, "subscription": sub, "payload": payload}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// ciphertextJob is a job carrying a body the upstream encrypted itself.
func ciphertextJob(t *testing.T, id string, sub jobfmt.Subscription, plaintext string) []byte {
	t.Helper()
	keys, err := ece.ParseKeys(sub.Keys.P256dh, sub.Keys.Auth)
	if err != nil {
		t.Fatal(err)
	}
	body, err := ece.Encrypt(keys, []byte(plaintext), ece.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"id": id, "subscription": sub, "ciphertext": base64.RawURLEncoding.EncodeToString(body)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) enqueue(jobs ...[]byte) {
	e.t.Helper()
	if _, err := e.prod.Enqueue(context.Background(), jobs...); err != nil {
		e.t.Fatalf("Enqueue: %v", err)
	}
}

// passReclaimGrace steps the clock past the time a worker waits, after Redis starts answering,
// before it reclaims anything (reclaimer.allowed): every live replica has beaten by then. The
// next heartbeat, at most one period later, lets the reclaimer run.
// It waits for w to be running first, so the step counts for it.
func (e *env) passReclaimGrace(w *worker) {
	e.t.Helper()
	e.waitRunning(w)
	e.stepReclaimGrace()
}

// waitRunning waits until w has logged that its loops run: Run's start-up (Redis answering,
// the replica registered) can take seconds on a loaded machine, and a test timing what the
// worker does counts from there.
func (e *env) waitRunning(w *worker) {
	e.t.Helper()
	waitFor(e.t, "the worker running", func() bool {
		return strings.Contains(e.logs.String()[w.logFrom:], "dispatch: running")
	})
}

// stepReclaimGrace steps the clock past the reclaim grace.
func (e *env) stepReclaimGrace() {
	hb := e.reg.Heartbeat()
	e.clock.Step(hb.StaleAfter + hb.Every + time.Millisecond)
}

// config is the worker configuration tests start from: the env's parts, short loop periods so
// outcomes show quickly, and a fixed jitter draw so due times are exact.
func (e *env) config(store *stream.Store) Config {
	return Config{
		Store: store, Sender: e.sender, Registry: e.reg, Campaigns: stream.CampaignsOf(store),
		Keys: map[string]*vapid.Key{"default": e.key},
		Now:  e.clock.Now, Rand: func() float64 { return 0.5 },
		Block: 50 * time.Millisecond, PromoteEvery: 10 * time.Millisecond,
		ReclaimEvery: 20 * time.Millisecond, JanitorEvery: 50 * time.Millisecond,
		Grace: 10 * time.Second,
		// What 0 would switch off is set as the worker's flags set it.
		Backoff:    Backoff{MaxRetries: DefaultMaxRetries},
		MaxDelayed: DefaultMaxDelayed, MaxPerRecipient: DefaultMaxPerRecipient, LaneGather: DefaultLaneGather,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// worker is one running Run.
type worker struct {
	t      testing.TB
	cancel context.CancelFunc
	errc   chan error
	once   sync.Once
	err    error
	// logFrom is the length of the env's log when the worker started: its lines come after.
	logFrom int
}

// start runs the worker until stop (or the end of the test).
func (e *env) start(cfg Config) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{t: e.t, cancel: cancel, errc: make(chan error, 1), logFrom: len(e.logs.String())}
	go func() { w.errc <- Run(ctx, cfg) }()
	e.t.Cleanup(func() { w.stop() })
	return w
}

// stop cancels Run and returns what it returned.
func (w *worker) stop() error {
	w.once.Do(func() {
		w.cancel()
		select {
		case w.err = <-w.errc:
		case <-time.After(waitLimit):
			w.t.Fatalf("Run did not return within %s of its cancellation", waitLimit)
		}
	})
	return w.err
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitLimit, what)
		}
		<-tick.C
	}
}

// waitStepping is waitFor on the env's stepped clock, stepping it by step at each look: for the
// entries that wait in the delayed set for a moment (put back because their recipient, or the
// unproven hosts' pool, had no room) to come due.
func (e *env) waitStepping(what string, step time.Duration, cond func() bool) {
	e.t.Helper()
	waitFor(e.t, what, func() bool {
		if cond() {
			return true
		}
		e.clock.Step(step)
		return false
	})
}

// all returns the records of one kind of stream ("results", "gone", "dead") on every shard.
func (e *env) all(kind string) []record {
	var out []record
	for s := 0; s < e.shards; s++ {
		k := e.store.Keys(s)
		key := map[string]string{"results": k.Results, "gone": k.Gone, "dead": k.Dead}[kind]
		out = append(out, e.xrange(key)...)
	}
	return out
}

// byID groups the records of one kind by job id.
func (e *env) byID(kind string) map[string][]record {
	out := map[string][]record{}
	for _, r := range e.all(kind) {
		out[r["id"]] = append(out[r["id"]], r)
	}
	return out
}

// one returns the single record of kind for id, failing when there is not exactly one.
func (e *env) one(kind, id string) record {
	e.t.Helper()
	rs := e.byID(kind)[id]
	if len(rs) != 1 {
		e.t.Fatalf("%s records for %s: %d, want 1: %v", kind, id, len(rs), rs)
	}
	return rs[0]
}

// waitRecord waits for a record of kind for id and returns it.
func (e *env) waitRecord(kind, id string) record {
	e.t.Helper()
	waitFor(e.t, kind+" record of "+id, func() bool { return len(e.byID(kind)[id]) > 0 })
	return e.one(kind, id)
}

// delayedDue is the due time of id in the delayed set, if it is there.
func (e *env) delayedDue(id string) (time.Time, bool) {
	k := e.store.Keys(stream.ShardOf(id, e.shards))
	s, ok := e.zscore(k.Delayed, id)
	return time.UnixMilli(int64(s)), ok
}

// retryWaits reports whether id waits in the delayed set for a retry after an attempt (its
// attempt is past 0), not only put back for a moment before its first.
func (e *env) retryWaits(id string) bool {
	if _, ok := e.delayedDue(id); !ok {
		return false
	}
	k := e.store.Keys(stream.ShardOf(id, e.shards))
	raw, err := e.redis.Client(e.t).HGet(context.Background(), k.DelayedData, id).Result()
	if err != nil {
		return false
	}
	var d struct{ Attempt json.Number }
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return false
	}
	n, _ := d.Attempt.Int64()
	return n > 0
}

// deliveriesOf are pushsim's answers to requests carrying job id.
func (e *env) deliveriesOf(id string) []pushsim.Delivery {
	var out []pushsim.Delivery
	for _, d := range e.sim.Deliveries() {
		if d.JobID == id {
			out = append(out, d)
		}
	}
	return out
}

// queuesEmpty reports whether no intake or lane stream of any shard holds an entry.
func (e *env) queuesEmpty() bool {
	for s := 0; s < e.shards; s++ {
		for _, st := range groupStreams(e.store.Keys(s), e.reg.IDs()) {
			if e.xlen(st) != 0 {
				return false
			}
		}
	}
	return true
}
