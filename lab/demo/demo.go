// Package demo is `gateway-lab demo`: the real pipeline on one machine (a Redis, pushsim's
// push services over TLS and HTTP/2, a steady stream of jobs in the market mix, the worker),
// a live per-provider table, a fault injected halfway, and an HTML and PNG report of the run.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/lab/localredis"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// genericHost stands for a self-hosted push service the registry does not know.
const genericHost = "push.example.net"

// subscriptionMix is how subscriptions spread over push services: roughly the browser market,
// and a few on a self-hosted service the registry does not list (the fallback lane).
var subscriptionMix = []struct {
	provider, host string
	subs           int
}{
	{"fcm", "", 72}, {"autopush", "", 19}, {"apple", "", 6}, {"wns", "", 3}, {"generic", genericHost, 2},
}

// providerOrder are the registry's providers in the order the demo shows them.
var providerOrder = []string{"fcm", "autopush", "apple", "wns", "fallback"}

// Options are the demo's settings; `gateway-lab demo` takes each from a flag.
type Options struct {
	// RedisURL is the Redis to use; "" starts a throwaway redis-server when one is on PATH,
	// else an in-process Redis.
	RedisURL string
	Duration time.Duration // how long jobs are enqueued; the fault comes halfway
	Rate     int           // jobs enqueued per second, spread over the mix
	Fault    Fault
	Report   string // the HTML report's file; the PNG goes beside it, named .png
	Payload  string // the message text, numbered per job
	Live     bool   // redraw the table in place (a terminal); otherwise print it every few seconds
}

// Check refuses settings the demo cannot run with.
func (o Options) Check() error {
	if o.Duration < 2*time.Second || o.Rate < 1 {
		return errors.New("--duration must be at least 2s and --rate at least 1")
	}
	return nil
}

// Fault is what the demo injects halfway through; the zero Fault is none.
type Fault struct {
	provider string // "" for none
	fault    pushsim.Fault
	label    string
}

// ParseFault reads --fault: PROVIDER=stall, PROVIDER=503:RATIO, PROVIDER=429:SECONDS, or none,
// PROVIDER one of the registry's (fallback for the self-hosted service).
func ParseFault(s string) (Fault, error) {
	if s == "none" || s == "" {
		return Fault{}, nil
	}
	prov, spec, ok := strings.Cut(s, "=")
	if !ok || !slices.Contains(providerOrder, prov) {
		return Fault{}, fmt.Errorf("--fault %q: want PROVIDER=stall|503:RATIO|429:SECONDS|none, PROVIDER one of %s", s, strings.Join(providerOrder, ", "))
	}
	simProv := prov
	if prov == "fallback" {
		simProv = pushsim.Generic
	}
	kind, arg, _ := strings.Cut(spec, ":")
	f := Fault{provider: simProv}
	switch kind {
	case "stall":
		f.fault, f.label = pushsim.Fault{Kind: pushsim.Stall}, prov+" stalls (accepts connections, never answers)"
	case "503":
		ratio, err := strconv.ParseFloat(arg, 64)
		if err != nil || ratio <= 0 || ratio > 1 {
			return Fault{}, fmt.Errorf("--fault %q: 503 takes the share of requests to fail, in (0, 1]: 503:0.4", s)
		}
		f.fault = pushsim.Fault{Kind: pushsim.Fail, Ratio: ratio, Status: 503}
		f.label = fmt.Sprintf("%s answers 503 to %.0f%% of requests", prov, ratio*100)
	case "429":
		secs, err := strconv.Atoi(arg)
		if err != nil || secs < 1 {
			return Fault{}, fmt.Errorf("--fault %q: 429 takes the Retry-After in whole seconds: 429:5", s)
		}
		f.fault = pushsim.Fault{Kind: pushsim.Throttle, Ratio: 1, RetryAfter: time.Duration(secs) * time.Second}
		f.label = fmt.Sprintf("%s throttles every request: 429, Retry-After %ds", prov, secs)
	case "none":
		return Fault{}, nil
	default:
		return Fault{}, fmt.Errorf("--fault %q: unknown fault %q (stall, 503:RATIO, 429:SECONDS, none)", s, kind)
	}
	return f, nil
}

// pickRedis picks the Redis the demo runs on and says which in its first line.
func pickRedis(ctx context.Context, o Options, out io.Writer) (url string, stop func(), err error) {
	if o.RedisURL != "" {
		fmt.Fprintf(out, "redis:   using %s\n", o.RedisURL)
		return o.RedisURL, func() {}, nil
	}
	// The worker's scripts need a real Redis 7 (script flags, XREADGROUP inside scripts): the
	// demo starts one, and says how to get it when it is missing.
	r, err := localredis.Start(ctx)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "redis:   started a throwaway redis-server at %s\n", r.URL())
	return r.URL(), r.Stop, nil
}

// cleanupHint says how to delete every key of prefix from the Redis at url: the redis-cli
// command line where redis-cli takes the URL, else the pattern to delete.
func cleanupHint(url, prefix string) string {
	pattern := "'" + prefix + ":*'"
	if strings.HasPrefix(url, "redis://") || strings.HasPrefix(url, "rediss://") {
		return fmt.Sprintf("redis-cli -u '%s' --scan --pattern %s | xargs -r redis-cli -u '%s' unlink", url, pattern, url)
	}
	return fmt.Sprintf("delete the keys matching %s (redis-cli --scan --pattern %s, then UNLINK them, on every node)", pattern, pattern)
}

// Run runs the real pipeline on one machine: Redis, pushsim, a steady stream of jobs across
// the providers, the worker, a live table, a fault halfway, and the report.
func Run(ctx context.Context, o Options, out io.Writer) error {
	url, stopRedis, err := pickRedis(ctx, o, out)
	if err != nil {
		return err
	}
	defer stopRedis()
	sim, err := pushsim.Start(pushsim.Config{Lean: true, MaxDeliveries: 1000})
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintf(out, "pushsim: FCM, Autopush, Apple, WNS and %s on %s (TLS, HTTP/2)\n", genericHost, sim.Addr())

	key, err := vapid.GenerateKey("default")
	if err != nil {
		return err
	}
	subs, err := newSubscriptions(sim, key)
	if err != nil {
		return err
	}
	// One Autopush subscription the browser dropped: its jobs end GONE, in the gone stream.
	for _, s := range subs {
		if strings.Contains(s.Endpoint, pushsim.AutopushHost) {
			sim.Expire(s.Endpoint)
			break
		}
	}
	// A prefix of its own, so the demo never touches a real deployment's keys on a shared Redis.
	prefix := fmt.Sprintf("wpdemo%d", time.Now().UnixNano()%1_000_000)
	if o.RedisURL != "" {
		fmt.Fprintf(out, "prefix:  %s (every key of this run starts with %s:; a worker finishes its jobs with --prefix %s)\n", prefix, prefix, prefix)
		defer fmt.Fprintf(out, "cleanup: %s\n", cleanupHint(o.RedisURL, prefix))
	}
	store, err := stream.Open(url, stream.OpenOptions{
		Options:    stream.Options{Prefix: prefix, Consumer: cli.ConsumerName(), CommitLinger: stream.DefaultCommitLinger},
		ClientName: "gateway-demo", BlockingPoolSize: 16,
	})
	if err != nil {
		return err
	}
	defer store.Close()
	insp, err := inspect.Open(url, stream.OpenOptions{Options: stream.Options{Prefix: prefix}, ClientName: "gateway-demo"})
	if err != nil {
		return err
	}
	defer insp.Close()
	reg, err := cli.LoadRegistry("")
	if err != nil {
		return err
	}
	tf := cli.Transport{
		ConnectTo: append(sim.ConnectTo(), net.JoinHostPort(genericHost, "443")+"="+sim.Addr()),
		CAFile:    sim.CAFile(), Subject: "mailto:demo@webpush-gateway.example.com",
	}
	sender, err := tf.Sender(reg)
	if err != nil {
		return err
	}
	defer sender.Close()

	start := time.Now()
	rec := newRecorder(start)
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		done <- dispatch.Run(wctx, dispatch.Config{
			Store: store, Sender: sender, Registry: reg, Keys: map[string]*vapid.Key{"default": key},
			Block: 100 * time.Millisecond, Grace: 2 * time.Second,
			// The worker's retries and gather (0 would switch them off).
			Backoff: dispatch.Backoff{MaxRetries: dispatch.DefaultMaxRetries}, LaneGather: dispatch.DefaultLaneGather,
			Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnAttempt:       rec.attempt,
			OnBreakerChange: rec.breaker,
		})
	}()
	fault := "no fault"
	if o.Fault.provider != "" {
		fault = fmt.Sprintf("at %s: %s", (o.Duration / 2).Round(time.Second), o.Fault.label)
	}
	fmt.Fprintf(out, "worker:  %d jobs/s for %s across fcm 72%%, autopush 19%%, apple 6%%, wns 3%%, self-hosted 2%%; %s\n\n",
		o.Rate, o.Duration, fault)

	enqErr := make(chan error, 1)
	ectx, stopEnqueue := context.WithCancel(ctx)
	defer stopEnqueue()
	go func() { enqErr <- enqueue(ectx, store.Producer(), subs, o, rec) }()

	table := &liveTable{out: out, live: o.Live}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	faulted := false
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			break loop
		case err := <-enqErr:
			runErr = err
			break loop
		case werr := <-done:
			done <- werr
			runErr = fmt.Errorf("the worker stopped early: %v", werr)
			break loop
		case now := <-tick.C:
			el := now.Sub(start)
			if !faulted && o.Fault.provider != "" && el >= o.Duration/2 {
				if err := sim.SetFault(o.Fault.provider, o.Fault.fault); err != nil {
					runErr = err
					break loop
				}
				rec.faultAt(now)
				faulted = true
			}
			last := el >= o.Duration
			table.draw(rec.snapshot(now), el, faulted, last)
			if last {
				break loop
			}
		}
	}
	stopEnqueue()
	end := time.Now()
	stopWorker()
	if werr := <-done; werr != nil && runErr == nil {
		runErr = werr
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	counts, err := insp.Counts(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	// Every job is in exactly one place: a terminal record, or still queued (intake, a lane,
	// the delayed set). Counted, not assumed.
	queued := counts["intake"] + counts["delayed"]
	for name, n := range counts {
		if strings.HasPrefix(name, "lane:") {
			queued += n
		}
	}
	enq := int64(rec.enqueued())
	verdict := "none lost"
	if sum := counts["results"] + counts["dead"] + queued; sum != enq {
		verdict = fmt.Sprintf("%d unaccounted for (ledger, dead and queue hold %d)", enq-sum, sum)
	}
	fmt.Fprintf(out, "\n%d jobs enqueued: %d in the ledger (%d of them GONE, in the gone stream too), %d dead-lettered, %d still queued in Redis (lanes, retries) for a worker to finish: %s.\n",
		enq, counts["results"], counts["gone"], counts["dead"], queued, verdict)
	reasons := map[string]int{}
	if err := insp.DeadRecords(context.WithoutCancel(ctx), func(d stream.DeadRecord) { reasons[d.Code+": "+d.Reason]++ }); err != nil {
		return err
	}
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		fmt.Fprintf(out, "  dead: %3d  %s\n", reasons[r], r)
	}
	return writeReport(o, rec.report(end, o, url), out)
}

// newSubscriptions makes the subscriptions jobs go to, spread as subscriptionMix says.
func newSubscriptions(sim *pushsim.Server, key *vapid.Key) ([]job.Subscription, error) {
	var subs []job.Subscription
	for _, m := range subscriptionMix {
		for range m.subs * 3 {
			s, err := sim.Subscribe(m.provider, m.host, key.PublicKey())
			if err != nil {
				return nil, err
			}
			subs = append(subs, s)
		}
	}
	return subs, nil
}

// enqueue puts o.Rate jobs a second on the intake stream until ctx ends, in small batches
// every 50 ms so the stream looks like steady traffic.
func enqueue(ctx context.Context, p *stream.Producer, subs []job.Subscription, o Options, rec *recorder) error {
	rng := rand.New(rand.NewPCG(1, 2))
	const every = 50 * time.Millisecond
	t := time.NewTicker(every)
	defer t.Stop()
	start, n := time.Now(), 0
	// Two jobs that cannot be sent, to show where they end: dead-lettered with their reason.
	bad := subs[0]
	bad.Endpoint = strings.Replace(bad.Endpoint, "https://", "http://", 1)
	var invalid [][]byte
	for _, j := range []map[string]any{
		{"id": "demo-bad-http", "subscription": bad, "payload": "x"},
		{"id": "demo-bad-ttl", "subscription": subs[1], "payload": "x", "ttl": -5},
	} {
		b, err := json.Marshal(j)
		if err != nil {
			return err
		}
		invalid = append(invalid, b)
	}
	if _, err := p.Enqueue(ctx, invalid...); err != nil {
		return err
	}
	rec.addEnqueued(len(invalid))
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			due := int(now.Sub(start).Seconds() * float64(o.Rate))
			var lines [][]byte
			for ; n < due; n++ {
				s := subs[rng.IntN(len(subs))]
				b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("demo-%06d", n), "subscription": s,
					"payload": fmt.Sprintf("%s #%d", o.Payload, n), "ttl": 3600, "urgency": "normal",
					"enqueued_at": now.UnixMilli()})
				if err != nil {
					return err
				}
				lines = append(lines, b)
			}
			if len(lines) == 0 {
				continue
			}
			added, err := p.Enqueue(ctx, lines...)
			rec.addEnqueued(added)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}
