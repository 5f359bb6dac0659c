// Package bench is `gateway-lab bench`: the same messages delivered through the gateway worker
// (the real gateway-worker binary, once with rates above what one machine sends and once at the
// shipped registry's rates), a plain Redis-stream consumer around webpush-go, one around Node's
// web-push, and the RFC 8291 encryption alone, each contender in a process of its own against
// one Redis and one pushsim, compared side by side in bench-report.json and bench-report.md.
// On the same rig it is also `gateway-lab priority` (priority.go): what the worker's priority
// classes and its shutdown give a user, in priority-report.json and priority-report.md.
package bench

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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/lab/localredis"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Contender names, in the order the bench runs them.
const (
	contenderFloor     = "rfc8291-floor"
	contenderSendFloor = "send-floor"
	contenderGateway   = "gateway"
	contenderCampaign  = "gateway-campaign"
	contenderPaced     = "gateway-paced"
	contenderNoLinger  = "gateway-paced-no-linger"
	contenderWebpushGo = "webpush-go"
	contenderNode      = "node-web-push"
)

// vapidSubject is the VAPID subject every contender signs with.
const vapidSubject = "mailto:bench@webpush-gateway.example.com"

// unknownHosts stand for self-hosted push services no registry entry lists: they go to
// the fallback lane, and pushsim answers them as a generic RFC 8030 service.
var unknownHosts = []string{"push.example.net", "webpush.selfhosted.example.org"}

// Options are the bench's settings; `gateway-lab bench` takes each from a flag.
type Options struct {
	// RedisURL is the Redis every contender uses; "" starts a throwaway redis-server.
	RedisURL        string
	Messages        int    // messages each contender delivers from a backlog
	PayloadSize     int    // plaintext bytes per message, at most 3993
	Mix             string // provider=weight,...: the subscriptions' push services (unknown: self-hosted)
	Concurrency     int    // sends in flight at once, for every contender
	LatencyMessages int    // messages of the paced phase; at most Messages are used
	LatencyRate     int    // messages per second in the paced phase
	Sample          int    // pushsim checks the signature and decrypts one push in Sample
	Only            string // comma-separated contenders to run; "" runs them all
	Out             string // the folder for bench-report.json, bench-report.md and the profile
	Profile         bool   // write a CPU profile of the gateway worker to Out/bench-gateway.pprof
	// WorkerBinary is the gateway-worker binary the gateway contender runs; "" takes the one
	// beside this process's executable, else the one on PATH.
	WorkerBinary string
	// LabBinary is the binary whose hidden bench-webpush-go command is the webpush-go
	// contender (gateway-lab); "" is this process's executable.
	LabBinary string
	NodeDir   string // where npm installs the Node contender's packages; "" is the user cache
	// Depths are the backlogs the paced gateway is measured behind (depthRow): one row each, so
	// that the cost per job with a deep backlog is set beside a shallow one. Empty: none.
	Depths []int
	Short  bool     // a quick run for CI: ShortMessages and ShortLatencyMessages
	Args   []string // the command line as given, for the report
}

// The sizes of a Short run.
const (
	ShortMessages        = 1000
	ShortLatencyMessages = 200
)

// Contenders are the contenders' names, in the order the bench runs them.
func Contenders() []string {
	return []string{contenderFloor, contenderSendFloor, contenderGateway, contenderCampaign, contenderPaced, contenderNoLinger, contenderWebpushGo, contenderNode}
}

// effective is o as the bench runs it: Short applied, and the latency phase no longer than
// the backlog. Each latency message goes to a subscription of its own, so that its answer is
// matched to its enqueue by endpoint, and there are as many subscriptions as backlog messages.
func (o Options) effective() Options {
	if o.Short {
		o.Messages, o.LatencyMessages = ShortMessages, ShortLatencyMessages
	}
	o.LatencyMessages = min(o.LatencyMessages, o.Messages)
	return o
}

// Check refuses settings the bench cannot run with; Run checks them too.
func (o Options) Check() error {
	o = o.effective()
	switch {
	case o.Messages < 10:
		return errors.New("--messages must be at least 10")
	case o.PayloadSize < 0 || o.PayloadSize > 3993:
		return errors.New("--payload-size must be 0 to 3993")
	case o.Concurrency < 1:
		return errors.New("--concurrency must be at least 1")
	case o.LatencyMessages < 0 || o.LatencyRate < 1:
		return errors.New("--latency-messages must be 0 or more and --latency-rate at least 1")
	case o.Sample < 1:
		return errors.New("--sample must be at least 1")
	}
	for _, d := range o.Depths {
		if d < 0 || d > 10_000_000 {
			return fmt.Errorf("--backlog-depths: %d is not 0 to 10000000 jobs", d)
		}
	}
	if _, err := parseMix(o.Mix); err != nil {
		return err
	}
	for _, c := range o.contenders() {
		if !slices.Contains(Contenders(), c) {
			return fmt.Errorf("--only: unknown contender %q", c)
		}
	}
	return nil
}

func (o Options) contenders() []string {
	if o.Only == "" {
		return Contenders()
	}
	var cs []string
	for c := range strings.SplitSeq(o.Only, ",") {
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

// runEnv is what every contender shares: Redis, pushsim, the key, the subscriptions.
type runEnv struct {
	o        Options
	out      io.Writer
	rdb      redis.UniversalClient
	redisURL string
	sim      *pushsim.Server
	dir      string // temporary files: key, registry, consumer configs
	keyFile  string // raw base64url private key, for `run --vapid-key`
	key      *vapid.Key
	privB64  string
	subs     []job.Subscription // one per backlog message, in a fixed random order
	warm     []job.Subscription // one per provider and unknown host, for the warm-up
	payload  string
	// campaign sends the backlog as one campaign (the gateway-campaign row).
	campaign bool
	worker   string // the gateway-worker binary
	lab      string // the binary with the bench-webpush-go command
	audience int    // distinct origins among subs: the signature bound
	polls    int64  // waitRecords' polls since it was last called
	registry string // the priority scenarios' registry file: the shipped rates
}

// Run runs every contender of o in turn against one Redis and one pushsim, prints the
// comparison to out and writes bench-report.json and bench-report.md into o.Out.
func Run(ctx context.Context, o Options, out io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	o = o.effective()
	total := o.Messages + o.LatencyMessages + 100
	env, closeEnv, err := openEnv(ctx, o, out, total)
	if err != nil {
		return err
	}
	defer closeEnv()
	fmt.Fprintf(out, "machine:  %s, %d CPUs, %s/%s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintf(out, "load:     %d messages of %d bytes from a backlog, then %d paced at %d/s for latency; concurrency %d; mix %s\n\n",
		o.Messages, o.PayloadSize, o.LatencyMessages, o.LatencyRate, o.Concurrency, describeMix(env.subs))

	var rows []Row
	for _, c := range o.contenders() {
		var (
			row Row
			err error
		)
		switch c {
		case contenderFloor:
			row, err = env.floor()
		case contenderSendFloor:
			row, err = env.sendFloor()
		case contenderGateway:
			row, err = env.gateway(ctx, false, true, false)
		case contenderCampaign:
			row, err = env.gateway(ctx, false, true, true)
		case contenderPaced:
			row, err = env.gateway(ctx, true, true, false)
		case contenderNoLinger:
			row, err = env.gateway(ctx, true, false, false)
		case contenderWebpushGo:
			row, err = env.plainConsumer(ctx, contenderWebpushGo, []string{env.lab, "bench-webpush-go"})
		case contenderNode:
			row, err = env.node(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		fmt.Fprintln(out, row.progressLine())
		rows = append(rows, row)
	}
	for _, d := range o.Depths {
		row, err := env.depthRow(ctx, d)
		if err != nil {
			return fmt.Errorf("%s with %d queued: %w", contenderPaced, d, err)
		}
		fmt.Fprintln(out, row.progressLine())
		rows = append(rows, row)
	}
	rep := newReport(env, rows)
	fmt.Fprintln(out)
	rep.writeText(out)
	return rep.save(o.Out, out)
}

// openEnv starts what every run shares (a throwaway redis-server unless o.RedisURL names one,
// pushsim keeping deliveries answers, the VAPID key, o.Messages subscriptions in o.Mix) and
// says so on out; closeEnv stops it all again.
func openEnv(ctx context.Context, o Options, out io.Writer, deliveries int) (env *runEnv, closeEnv func(), err error) {
	env = &runEnv{o: o, out: out}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	if env.worker, env.lab, err = binaries(o, self); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, nil, err
	}
	if env.dir, err = os.MkdirTemp("", "gateway-bench-"); err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { os.RemoveAll(env.dir) })
	if env.redisURL = o.RedisURL; env.redisURL == "" {
		r, err := localredis.Start(ctx)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, r.Stop)
		env.redisURL = r.URL()
		fmt.Fprintf(out, "redis:    started a throwaway redis-server at %s\n", r.URL())
	} else {
		fmt.Fprintf(out, "redis:    using %s\n", env.redisURL)
	}
	// The lab's own view of Redis: INFO figures, and the stream of the contenders that read
	// one themselves.
	if env.rdb, err = stream.OpenClient(env.redisURL, stream.OpenOptions{ClientName: "gateway-bench"}); err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { env.rdb.Close() })
	if err := env.rdb.Ping(ctx).Err(); err != nil {
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	if env.sim, err = pushsim.Start(pushsim.Config{Sample: o.Sample, Lean: true, MaxDeliveries: deliveries}); err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { env.sim.Close() })
	fmt.Fprintf(out, "pushsim:  %s; checks the JWT signature and decrypts 1 push in %d (every push gets the other checks)\n", env.sim.Addr(), o.Sample)
	if err := env.prepare(); err != nil {
		return nil, nil, err
	}
	return env, closeAll, nil
}

// binaries finds the contenders' executables: o's, or self (this process's executable) and the
// gateway-worker beside it (make build puts them side by side in bin/), or on PATH.
func binaries(o Options, self string) (worker, lab string, err error) {
	if lab = o.LabBinary; lab == "" {
		lab = self
	}
	if worker = o.WorkerBinary; worker != "" {
		return worker, lab, nil
	}
	beside := filepath.Join(filepath.Dir(self), "gateway-worker")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside, lab, nil
	}
	if worker, err := exec.LookPath("gateway-worker"); err == nil {
		return worker, lab, nil
	}
	return "", "", fmt.Errorf("no gateway-worker beside %s nor on PATH: build it (make build) or pass --worker-binary", self)
}

// prepare makes the VAPID key and the subscriptions.
func (env *runEnv) prepare() error {
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
	mix, _ := parseMix(env.o.Mix)
	rng := mrand.New(mrand.NewPCG(5, 20))
	subscribe := func(provider string, i int) (job.Subscription, error) {
		if provider == "unknown" {
			return env.sim.Subscribe(pushsim.Generic, unknownHosts[i%len(unknownHosts)], env.key.PublicKey())
		}
		return env.sim.Subscribe(provider, "", env.key.PublicKey())
	}
	// Whole counts per provider (rounded down; the few left over go round the mix), shuffled.
	var kinds []string
	for _, m := range mix {
		for range int(m.weight * float64(env.o.Messages)) {
			kinds = append(kinds, m.provider)
		}
	}
	for i := 0; len(kinds) < env.o.Messages; i++ {
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
			n = len(unknownHosts)
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
	env.payload = strings.Repeat("x", env.o.PayloadSize)
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

func describeMix(subs []job.Subscription) string {
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
func (env *runEnv) job(id string, sub job.Subscription) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": id, "subscription": sub, "payload": env.payload, "ttl": 3600, "urgency": "normal",
	})
	return b
}
