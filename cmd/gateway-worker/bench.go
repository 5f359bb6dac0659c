package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Contender names, in the order bench runs them.
const (
	benchFloor     = "rfc8291-floor"
	benchGateway   = "gateway"
	benchWebpushGo = "webpush-go"
	benchNode      = "node-web-push"
)

// benchSubject is the VAPID subject every contender signs with.
const benchSubject = "mailto:bench@webpush-gateway.example.com"

// benchUnknownHosts stand for self-hosted push services no registry entry lists: they go to
// the fallback lane, and pushsim answers them as a generic RFC 8030 service.
var benchUnknownHosts = []string{"push.example.net", "webpush.selfhosted.example.org"}

type benchOptions struct {
	redisURL     string
	messages     int
	payloadSize  int
	mix          string
	concurrency  int
	latencyN     int
	latencyRate  int
	sample       int
	only         string
	out          string
	profile      bool
	workerBinary string
	nodeDir      string
	short        bool
	args         []string // as given, for the report
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", stderr)
	var o benchOptions
	fs.StringVar(&o.redisURL, "redis", "", "Redis `URL` to use (default: start a throwaway redis-server on a free port); a server others use adds their commands and CPU to the Redis figures")
	fs.IntVar(&o.messages, "messages", 20_000, "messages each contender delivers from a backlog (throughput, CPU, bytes)")
	fs.IntVar(&o.payloadSize, "payload-size", 256, "plaintext `BYTES` per message (at most 3993)")
	fs.StringVar(&o.mix, "mix", "fcm=72,autopush=19,apple=6,wns=3,unknown=1", "provider `WEIGHTS` of the subscriptions; unknown is self-hosted hosts in the fallback lane")
	fs.IntVar(&o.concurrency, "concurrency", 64, "sends in flight at once, for every contender")
	fs.IntVar(&o.latencyN, "latency-messages", 2000, "messages of the paced phase that measures enqueue-to-answer latency")
	fs.IntVar(&o.latencyRate, "latency-rate", 500, "messages per second in the paced latency phase")
	fs.IntVar(&o.sample, "sample", 50, "pushsim verifies the JWT signature and decrypts the body of one push in `N`")
	fs.StringVar(&o.only, "only", "", "comma-separated contenders to run (default all): "+strings.Join([]string{benchFloor, benchGateway, benchWebpushGo, benchNode}, ","))
	fs.StringVar(&o.out, "out", ".", "`DIR` for bench-report.json and bench-report.md (and bench-gateway.pprof with --profile)")
	fs.BoolVar(&o.profile, "profile", false, "write a CPU profile of the gateway worker to DIR/bench-gateway.pprof")
	fs.StringVar(&o.workerBinary, "worker-binary", "", "gateway-worker `BINARY` to run the contenders with (default: this one)")
	fs.StringVar(&o.nodeDir, "node-dir", "", "`DIR` where npm installs web-push and redis for the Node contender (default: the user cache directory)")
	fs.BoolVar(&o.short, "short", false, "a quick run for CI: 1,000 messages, 200 in the latency phase")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	if err := noArgs(fs); err != nil {
		return 2
	}
	if o.short {
		o.messages, o.latencyN = 1000, 200
	}
	// Each latency message goes to a subscription of its own, so that its answer is matched to
	// its enqueue by endpoint: there are as many subscriptions as backlog messages.
	o.latencyN = min(o.latencyN, o.messages)
	o.args = args
	if err := o.check(); err != nil {
		return exitUsage(err)
	}
	if err := runBench(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-worker bench:", err)
		return 1
	}
	return 0
}

func (o *benchOptions) check() error {
	switch {
	case o.messages < 10:
		return errors.New("--messages must be at least 10")
	case o.payloadSize < 0 || o.payloadSize > 3993:
		return errors.New("--payload-size must be 0 to 3993")
	case o.concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case o.latencyN < 0 || o.latencyRate < 1:
		return errors.New("--latency-messages must be 0 or more and --latency-rate at least 1")
	case o.sample < 1:
		return errors.New("--sample must be at least 1")
	}
	if _, err := parseMix(o.mix); err != nil {
		return err
	}
	for _, c := range o.contenders() {
		if !slices.Contains([]string{benchFloor, benchGateway, benchWebpushGo, benchNode}, c) {
			return fmt.Errorf("--only: unknown contender %q", c)
		}
	}
	return nil
}

func (o *benchOptions) contenders() []string {
	if o.only == "" {
		return []string{benchFloor, benchGateway, benchWebpushGo, benchNode}
	}
	var cs []string
	for c := range strings.SplitSeq(o.only, ",") {
		cs = append(cs, strings.TrimSpace(c))
	}
	return cs
}

// mixShare is one provider's weight in the subscription mix.
type mixShare struct {
	provider string // a pushsim provider, or "unknown"
	weight   float64
}

func parseMix(s string) ([]mixShare, error) {
	var mix []mixShare
	total := 0.0
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		w, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil || w < 0 || math.IsInf(w, 0) || math.IsNaN(w) {
			return nil, fmt.Errorf("--mix: %q is not provider=weight", part)
		}
		if name != "unknown" && !slices.Contains(pushsim.Providers(), name) || name == pushsim.Generic {
			return nil, fmt.Errorf("--mix: unknown provider %q (fcm, autopush, apple, wns, unknown)", name)
		}
		mix = append(mix, mixShare{name, w})
		total += w
	}
	if total <= 0 {
		return nil, errors.New("--mix: the weights add up to nothing")
	}
	for i := range mix {
		mix[i].weight /= total
	}
	return mix, nil
}

// benchEnv is what every contender shares: Redis, pushsim, the key, the subscriptions.
type benchEnv struct {
	o        benchOptions
	out      io.Writer
	rdb      redis.UniversalClient
	redisURL string
	sim      *pushsim.Server
	dir      string // temporary files: key, registry, consumer configs
	keyFile  string // raw base64url private key, for `run --vapid-key`
	key      *vapid.Key
	privB64  string
	subs     []pushsim.Subscription // one per backlog message, in a fixed random order
	warm     []pushsim.Subscription // one per provider and unknown host, for the warm-up
	payload  string
	bin      string
	audience int // distinct origins among subs: the signature bound
}

func runBench(ctx context.Context, o benchOptions, out io.Writer) error {
	env := &benchEnv{o: o, out: out}
	var err error
	if env.bin = o.workerBinary; env.bin == "" {
		if env.bin, err = os.Executable(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if env.dir, err = os.MkdirTemp("", "gateway-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(env.dir)
	if env.redisURL = o.redisURL; env.redisURL == "" {
		r, err := startLocalRedis(ctx)
		if err != nil {
			return err
		}
		defer r.Stop()
		env.redisURL = r.url
		fmt.Fprintf(out, "redis:    started a throwaway redis-server at %s\n", r.url)
	} else {
		fmt.Fprintf(out, "redis:    using %s\n", env.redisURL)
	}
	env.rdb, _, err = stream.Connect(env.redisURL, stream.ConnectOptions{ClientName: "gateway-bench"})
	if err != nil {
		return err
	}
	defer env.rdb.Close()
	if err := env.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	total := o.messages + o.latencyN + 100
	env.sim, err = pushsim.Start(pushsim.Config{Sample: o.sample, Lean: true, MaxDeliveries: total})
	if err != nil {
		return err
	}
	defer env.sim.Close()
	fmt.Fprintf(out, "pushsim:  %s; checks the JWT signature and decrypts 1 push in %d (every push gets the other checks)\n", env.sim.Addr(), o.sample)
	if err := env.prepare(); err != nil {
		return err
	}
	fmt.Fprintf(out, "machine:  %s, %d CPUs, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(out, "load:     %d messages of %d bytes from a backlog, then %d paced at %d/s for latency; concurrency %d; mix %s\n\n",
		o.messages, o.payloadSize, o.latencyN, o.latencyRate, o.concurrency, describeMix(env.subs))

	var rows []benchRow
	for _, c := range o.contenders() {
		var (
			row benchRow
			err error
		)
		switch c {
		case benchFloor:
			row, err = env.floor()
		case benchGateway:
			row, err = env.gateway(ctx)
		case benchWebpushGo:
			row, err = env.plainConsumer(ctx, benchWebpushGo, []string{env.bin, "bench-webpush-go"})
		case benchNode:
			row, err = env.node(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		fmt.Fprintln(out, row.progressLine())
		rows = append(rows, row)
	}
	rep := newBenchReport(env, rows)
	fmt.Fprintln(out)
	rep.writeText(out)
	return rep.save(o.out, out)
}

// prepare makes the VAPID key and the subscriptions.
func (env *benchEnv) prepare() error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	d, err := priv.Bytes()
	if err != nil {
		return err
	}
	env.privB64 = base64.RawURLEncoding.EncodeToString(d)
	if env.key, err = vapid.ParseKey("default", []byte(env.privB64)); err != nil {
		return err
	}
	env.keyFile = filepath.Join(env.dir, "vapid.key")
	if err := os.WriteFile(env.keyFile, []byte(env.privB64+"\n"), 0o600); err != nil {
		return err
	}
	mix, _ := parseMix(env.o.mix)
	rng := mrand.New(mrand.NewPCG(5, 20))
	subscribe := func(provider string, i int) (pushsim.Subscription, error) {
		if provider == "unknown" {
			return env.sim.Subscribe(pushsim.Generic, benchUnknownHosts[i%len(benchUnknownHosts)], env.key.PublicKey())
		}
		return env.sim.Subscribe(provider, "", env.key.PublicKey())
	}
	// Whole counts per provider (rounded down; the few left over go round the mix), shuffled.
	var kinds []string
	for _, m := range mix {
		for range int(m.weight * float64(env.o.messages)) {
			kinds = append(kinds, m.provider)
		}
	}
	for i := 0; len(kinds) < env.o.messages; i++ {
		kinds = append(kinds, mix[i%len(mix)].provider)
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	origins := map[string]bool{}
	for i, k := range kinds {
		s, err := subscribe(k, i)
		if err != nil {
			return err
		}
		env.subs = append(env.subs, s)
		if u, err := urlOrigin(s.Endpoint); err == nil {
			origins[u] = true
		}
	}
	for _, m := range mix {
		n := 1
		if m.provider == "unknown" {
			n = len(benchUnknownHosts)
		}
		for i := range n {
			s, err := subscribe(m.provider, i)
			if err != nil {
				return err
			}
			env.warm = append(env.warm, s)
			if u, err := urlOrigin(s.Endpoint); err == nil {
				origins[u] = true
			}
		}
	}
	// The signature bound: one JWT per (key, audience), and the run has one key.
	env.audience = len(origins)
	env.payload = strings.Repeat("x", env.o.payloadSize)
	return nil
}

func urlOrigin(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "https://")
	if !ok {
		return "", errors.New("not https")
	}
	host, _, _ := strings.Cut(rest, "/")
	return host, nil
}

func describeMix(subs []pushsim.Subscription) string {
	counts := map[string]int{}
	for _, s := range subs {
		h, _ := urlOrigin(s.Endpoint)
		p := providerOfHost(h)
		counts[p]++
	}
	var parts []string
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "unknown"} {
		if counts[p] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", p, 100*float64(counts[p])/float64(len(subs))))
		}
	}
	return strings.Join(parts, ", ")
}

func providerOfHost(h string) string {
	switch {
	case h == pushsim.FCMHost:
		return "fcm"
	case h == pushsim.AutopushHost:
		return "autopush"
	case h == pushsim.AppleHost:
		return "apple"
	case strings.HasSuffix(h, "notify.windows.com"):
		return "wns"
	}
	return "unknown"
}

// job is the JSON line of message i to sub.
func (env *benchEnv) job(id string, sub pushsim.Subscription) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": id, "subscription": sub, "payload": env.payload, "ttl": 3600, "urgency": "normal",
	})
	return b
}

// phase is one contender's measurements.
type phase struct {
	answered  int
	accepted  int
	errors    map[string]int
	first     time.Time
	last      time.Time
	cpu       time.Duration
	peakRSS   int64
	bytesIn   uint64
	latencies []time.Duration
	tokens    uint64
	// What the rest of the machine spent on the backlog: pushsim (this process) and Redis.
	simCPU, redisCPU time.Duration
}

// drive runs the common part of a consumer contender: warm-up, backlog, paced latency phase.
// The process must already be running and reading prefix's intake stream (shard 0).
func (env *benchEnv) drive(ctx context.Context, prefix string, pid int, exited <-chan struct{}) (phase, error) {
	var ph phase
	producer := stream.NewProducer(env.rdb, prefix, 1)
	env.sim.Reset()
	// Warm-up: one message per push service, so connections are open and the process has
	// finished starting before anything is measured.
	var warm [][]byte
	for i, s := range env.warm {
		warm = append(warm, env.job(fmt.Sprintf("warm-%d", i), s))
	}
	if _, err := producer.Enqueue(ctx, warm...); err != nil {
		return ph, err
	}
	if err := env.waitAnswers(ctx, len(warm), exited, 60*time.Second); err != nil {
		return ph, fmt.Errorf("warm-up: %w", err)
	}
	// Backlog: every message at once, as fast as Redis takes them. The jobs are built before
	// the measurement starts; their XADD, like an upstream's, is in it.
	lines := make([][]byte, len(env.subs))
	for i, s := range env.subs {
		lines[i] = env.job(fmt.Sprintf("b-%06d", i), s)
	}
	startSeq := env.lastSeq()
	before, err := sampleProc(pid)
	if err != nil {
		return ph, err
	}
	statsBefore := env.sim.Stats()
	simBefore := selfCPU()
	redisBefore, redisErr := redisCPU(ctx, env.rdb)
	if _, err := producer.Enqueue(ctx, lines...); err != nil {
		return ph, err
	}
	limit := time.Duration(max(120, env.o.messages/50)) * time.Second
	if err := env.waitAnswers(ctx, len(warm)+len(lines), exited, limit); err != nil {
		return ph, fmt.Errorf("backlog: %w", err)
	}
	after, err := sampleProc(pid)
	if err != nil {
		return ph, err
	}
	statsAfter := env.sim.Stats()
	ph.simCPU = selfCPU() - simBefore
	if redisAfter, err := redisCPU(ctx, env.rdb); err == nil && redisErr == nil {
		ph.redisCPU = redisAfter - redisBefore
	}
	ph.cpu, ph.peakRSS = after.cpu-before.cpu, after.peakRSS
	ph.bytesIn = statsAfter.BytesIn - statsBefore.BytesIn
	ds := env.sim.DeliveriesSince(startSeq, "")
	ph.errors = map[string]int{}
	for _, d := range ds {
		ph.answered++
		if d.Code == "ACCEPTED" {
			ph.accepted++
		} else {
			ph.errors[fmt.Sprintf("%s %d", d.Code, d.Status)]++
		}
	}
	if len(ds) > 0 {
		ph.first, ph.last = ds[0].At, ds[len(ds)-1].At
	}

	// Latency: messages one at a time at a steady rate, each to its own subscription, timed
	// from just before its XADD to pushsim receiving it.
	latSeq := env.lastSeq()
	sent := make(map[string]time.Time, env.o.latencyN)
	tick := time.NewTicker(time.Second / time.Duration(env.o.latencyRate))
	defer tick.Stop()
	for i := range env.o.latencyN {
		s := env.subs[i]
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ph, ctx.Err()
		}
		sent[s.Endpoint] = time.Now()
		if _, err := producer.Enqueue(ctx, env.job(fmt.Sprintf("l-%06d", i), s)); err != nil {
			return ph, err
		}
	}
	if err := env.waitAnswers(ctx, len(warm)+len(lines)+env.o.latencyN, exited, 60*time.Second); err != nil {
		return ph, fmt.Errorf("latency phase: %w", err)
	}
	for _, d := range env.sim.DeliveriesSince(latSeq, "") {
		if t, ok := sent[d.Endpoint]; ok {
			ph.latencies = append(ph.latencies, d.At.Sub(t))
			delete(sent, d.Endpoint)
		}
	}
	slices.Sort(ph.latencies)
	ph.tokens = env.sim.Stats().Tokens
	return ph, nil
}

func (env *benchEnv) lastSeq() uint64 {
	ds := env.sim.DeliveriesSince(0, "")
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)-1].Seq
}

// waitAnswers waits until pushsim has answered n requests since its last Reset.
func (env *benchEnv) waitAnswers(ctx context.Context, n int, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		got := env.sim.Stats().Requests
		if got >= uint64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pushsim answered %d of %d requests within %s", got, n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("the process exited before delivering everything")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// measure runs a contender: it starts its process in dir, drives it through the warm-up, the
// backlog and the latency phase on prefix's stream, and stops it.
func (env *benchEnv) measure(ctx context.Context, argv []string, dir, prefix string) (phase, *child, error) {
	c, err := startChild(argv, dir)
	if err != nil {
		return phase{}, nil, err
	}
	ph, err := env.drive(ctx, prefix, c.cmd.Process.Pid, c.exited)
	if err != nil {
		_ = c.stop(5 * time.Second)
		// What the process printed says why: its summary (the plain consumers count their
		// failures by status) and its last errors.
		return ph, c, fmt.Errorf("%w\n%s\n%s", err, lastLines(c.stdout.String(), 3), lastLines(c.stderr.String(), 5))
	}
	return ph, c, c.stop(30 * time.Second)
}

// child is a contender's process.
type child struct {
	cmd     *exec.Cmd
	stdout  *lockedWriter
	stderr  *lockedWriter
	exited  chan struct{}
	waitErr error // set before exited is closed
}

func startChild(argv []string, dir string) (*child, error) {
	c := &child{stdout: &lockedWriter{w: &strings.Builder{}}, stderr: &lockedWriter{w: &strings.Builder{}}, exited: make(chan struct{})}
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// stop asks the process to finish (SIGTERM) and waits; past limit it is killed.
func (c *child) stop(limit time.Duration) error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(limit):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("did not stop within %s of SIGTERM", limit)
	}
	if c.waitErr != nil {
		return fmt.Errorf("%v: %s", c.waitErr, lastLines(c.stderr.String(), 5))
	}
	return nil
}

// peakRSS is the process's peak resident set as the kernel kept it until the end.
func (c *child) peakRSS() int64 {
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// gateway runs the whole pipeline as `gateway-worker run` in a process of its own.
func (env *benchEnv) gateway(ctx context.Context) (benchRow, error) {
	row := benchRow{Name: benchGateway, What: "gateway-worker run: intake, lanes, limits, send, ledger"}
	prefix := fmt.Sprintf("benchgw%d", time.Now().UnixNano()%1_000_000)
	reg := filepath.Join(env.dir, "bench-registry.yaml")
	if err := os.WriteFile(reg, []byte(benchRegistry(env)), 0o644); err != nil {
		return row, err
	}
	statsFile := filepath.Join(env.dir, "gateway-stats.json")
	argv := []string{env.bin, "run", "--redis", env.redisURL, "--prefix", prefix, "--registry", reg,
		"--vapid-key", env.keyFile, "--subject", benchSubject, "--ca-file", env.sim.CAFile(),
		"--stats-file", statsFile, "--log-level", "warn", "--grace", "10s"}
	for _, ct := range env.connectTo() {
		argv = append(argv, "--connect-to", ct)
	}
	if env.o.profile {
		abs, err := filepath.Abs(filepath.Join(env.o.out, "bench-gateway.pprof"))
		if err != nil {
			return row, err
		}
		argv = append(argv, "--cpu-profile", abs)
		row.Profile = abs
	}
	before, err := commandCalls(ctx, env.rdb)
	if err != nil {
		return row, err
	}
	ph, c, err := env.measure(ctx, argv, "", prefix)
	if err != nil {
		return row, err
	}
	after, err := commandCalls(ctx, env.rdb)
	if err != nil {
		return row, err
	}
	var st runStats
	b, err := os.ReadFile(statsFile)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		return row, fmt.Errorf("worker stats: %w", err)
	}
	jobs := len(env.warm) + len(env.subs) + env.o.latencyN
	row.fill(env, ph)
	row.PeakRSS = max(row.PeakRSS, c.peakRSS())
	// Commands Redis ran (inside scripts too), less the XADDs that enqueued the jobs.
	cmds := after - before - int64(jobs)
	row.RedisCommandsPerJob = float64(cmds) / float64(jobs)
	row.RedisRoundTripsPerJob = float64(st.RedisRoundTrips) / float64(jobs)
	row.SignaturesSelf = int64(st.VAPIDSignatures)
	// Every job must have its ledger record: a fast gateway that loses jobs is not a result.
	store := stream.New(env.rdb, env.rdb, stream.Options{Prefix: prefix})
	counts, err := store.Counts(ctx)
	if err != nil {
		return row, err
	}
	row.Ledger = counts["results"]
	if counts["results"]+counts["dead"] != int64(jobs) {
		return row, fmt.Errorf("%d jobs enqueued but %d ledger and %d dead records", jobs, counts["results"], counts["dead"])
	}
	return row, nil
}

// connectTo sends every host the subscriptions use to pushsim.
func (env *benchEnv) connectTo() []string {
	cts := env.sim.ConnectTo()
	for _, h := range benchUnknownHosts {
		cts = append(cts, net.JoinHostPort(h, "443")+"="+env.sim.Addr())
	}
	return cts
}

// benchRegistry is registry.yaml for the bench: the shipped hosts, rates far above what one
// machine can send (the bench measures cost, not the fleet's rate limits), and the contenders'
// concurrency shared by the mix, at least 4 a provider.
func benchRegistry(env *benchEnv) string {
	mix, _ := parseMix(env.o.mix)
	share := map[string]float64{}
	for _, m := range mix {
		share[m.provider] = m.weight
	}
	alloc := shareSlots(mix, env.o.concurrency)
	slots := func(p string) int { return alloc[p] }
	var b strings.Builder
	fmt.Fprintf(&b, "# written by gateway-worker bench\nversion: 1\nproviders:\n")
	entry := func(id string, hosts []string, p string) {
		fmt.Fprintf(&b, "  - id: %s\n", id)
		if len(hosts) > 0 {
			fmt.Fprintf(&b, "    hosts: [%s]\n", strings.Join(hosts, ", "))
		}
		fmt.Fprintf(&b, "    rate: 1000000\n    burst: 100000\n    max_in_flight: %d\n", slots(p))
	}
	entry("fcm", []string{"fcm.googleapis.com", "android.googleapis.com"}, "fcm")
	entry("autopush", []string{"updates.push.services.mozilla.com", "push.services.mozilla.com"}, "autopush")
	entry("apple", []string{"web.push.apple.com"}, "apple")
	entry("wns", []string{"notify.windows.com"}, "wns")
	fmt.Fprintf(&b, "  - id: fallback\n    kind: generic\n    rate: 1000000\n    burst: 100000\n    max_in_flight: %d\n", slots("unknown"))
	return b.String()
}

// redisCPU is the CPU time the Redis server has used (INFO cpu: used_cpu_sys + used_cpu_user).
func redisCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu: %q", line)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}

// shareSlots splits total in-flight slots over the mix by weight (largest remainders), at least
// one a provider, so the gateway has the same concurrency as the other contenders.
func shareSlots(mix []mixShare, total int) map[string]int {
	out := map[string]int{}
	type rem struct {
		p string
		r float64
	}
	var rems []rem
	left := total
	for _, m := range mix {
		exact := m.weight * float64(total)
		out[m.provider] = max(1, int(exact))
		left -= out[m.provider]
		rems = append(rems, rem{m.provider, exact - math.Floor(exact)})
	}
	sort.SliceStable(rems, func(i, j int) bool { return rems[i].r > rems[j].r })
	for i := 0; left > 0 && len(rems) > 0; i = (i + 1) % len(rems) {
		out[rems[i].p]++
		left--
	}
	return out
}

// commandCalls is the number of commands Redis has run, scripts' own calls included.
func commandCalls(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for line := range strings.SplitSeq(info, "\n") {
		_, rest, ok := strings.Cut(line, "calls=")
		// The bench's own INFO calls are not the worker's.
		if !ok || !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %q", line)
		}
		total += n
	}
	return total, nil
}

// plainConsumer runs a contender that reads the stream itself (benchgo.go, benchnode/).
func (env *benchEnv) plainConsumer(ctx context.Context, name string, argv []string) (benchRow, error) {
	row := benchRow{Name: name}
	switch name {
	case benchWebpushGo:
		row.What = fmt.Sprintf("XREADGROUP + webpush-go SendNotification (RecordSize %d) + XACK per message", webpushGoRecordSize)
	case benchNode:
		row.What = "XREADGROUP + web-push sendNotification (Node " + nodeVersion() + ") + XACK per message"
	}
	prefix := fmt.Sprintf("bench%s%d", strings.ReplaceAll(name, "-", ""), time.Now().UnixNano()%1_000_000)
	key := stream.KeysFor(prefix, 0).Intake
	const group = "bench"
	if err := env.rdb.XGroupCreateMkStream(ctx, key, group, "0").Err(); err != nil {
		return row, err
	}
	var cfg benchConsumerConfig
	cfg.Redis, cfg.Stream, cfg.Group, cfg.Consumer = env.redisURL, key, group, name+"-1"
	cfg.Concurrency, cfg.Batch = env.o.concurrency, env.o.concurrency
	cfg.Connect, cfg.CAFile = env.sim.Addr(), env.sim.CAFile()
	cfg.VAPID.Subject, cfg.VAPID.PublicKey, cfg.VAPID.PrivateKey = benchSubject, env.key.PublicKey(), env.privB64
	cfgFile := filepath.Join(env.dir, name+".json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		return row, err
	}
	// Node resolves its packages from the folder it runs in: the consumer's own.
	ph, c, err := env.measure(ctx, append(argv, cfgFile), filepath.Dir(argv[1]), prefix)
	if err != nil {
		return row, err
	}
	row.fill(env, ph)
	row.PeakRSS = max(row.PeakRSS, c.peakRSS())
	return row, nil
}

// floor is the RFC 8291 encryption alone, in this process, while nothing else runs in it: a
// fresh key pair, ECDH, HKDF and AES-GCM per message, for the same payload.
func (env *benchEnv) floor() (benchRow, error) {
	row := benchRow{Name: benchFloor, What: "ece.Encrypt alone: key pair, ECDH, HKDF, AES-GCM (this process, one goroutine)"}
	n := min(env.o.messages, 5000)
	keys := make([]*ece.Keys, 0, 64)
	for _, s := range env.subs[:min(64, len(env.subs))] {
		k, err := ece.ParseKeys(s.Keys.P256dh, s.Keys.Auth)
		if err != nil {
			return row, err
		}
		keys = append(keys, k)
	}
	payload := []byte(env.payload)
	var buf []byte
	cpu0 := selfCPU()
	wall0 := time.Now()
	for i := range n {
		var err error
		if buf, err = ece.AppendEncrypt(buf[:0], keys[i%len(keys)], payload, ece.Options{}); err != nil {
			return row, err
		}
	}
	wall := time.Since(wall0)
	cpu := selfCPU() - cpu0
	row.Messages = n
	row.Delivered = n
	row.CPUPerMsg = float64(cpu.Microseconds()) / float64(n)
	row.MsgsPerSec = float64(n) / wall.Seconds()
	row.BytesPerMsg = float64(len(buf))
	row.Floor = true
	return row, nil
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuModel is the processor's name from /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// lockedWriter lets a child's output be read while the child still writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
