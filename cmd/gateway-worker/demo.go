package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/demoreport"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// demoGenericHost stands for a self-hosted push service the registry does not know.
const demoGenericHost = "push.example.net"

// demoMix is how subscriptions spread over push services: roughly the browser market, and a
// few on a self-hosted service the registry does not list (the fallback lane).
var demoMix = []struct {
	provider, host string
	subs           int
}{
	{"fcm", "", 72}, {"autopush", "", 19}, {"apple", "", 6}, {"wns", "", 3}, {"generic", demoGenericHost, 2},
}

// demoProviders are the registry's providers in the order the demo shows them.
var demoProviders = []string{"fcm", "autopush", "apple", "wns", "fallback"}

type demoOptions struct {
	redisURL string
	duration time.Duration
	rate     int
	fault    demoFault
	report   string
	payload  string
	live     bool // redraw the table in place (a terminal); otherwise print it every few seconds
}

// demoFault is what --fault injects halfway through.
type demoFault struct {
	provider string // "" for none
	fault    pushsim.Fault
	label    string
}

func parseDemoFault(s string) (demoFault, error) {
	if s == "none" || s == "" {
		return demoFault{}, nil
	}
	prov, spec, ok := strings.Cut(s, "=")
	if !ok || !slices.Contains(demoProviders, prov) {
		return demoFault{}, fmt.Errorf("--fault %q: want PROVIDER=stall|503:RATIO|429:SECONDS|none, PROVIDER one of %s", s, strings.Join(demoProviders, ", "))
	}
	simProv := prov
	if prov == "fallback" {
		simProv = pushsim.Generic
	}
	kind, arg, _ := strings.Cut(spec, ":")
	f := demoFault{provider: simProv}
	switch kind {
	case "stall":
		f.fault, f.label = pushsim.Fault{Kind: pushsim.Stall}, prov+" stalls (accepts connections, never answers)"
	case "503":
		ratio, err := strconv.ParseFloat(arg, 64)
		if err != nil || ratio <= 0 || ratio > 1 {
			return demoFault{}, fmt.Errorf("--fault %q: 503 takes the share of requests to fail, in (0, 1]: 503:0.4", s)
		}
		f.fault = pushsim.Fault{Kind: pushsim.Fail, Ratio: ratio, Status: 503}
		f.label = fmt.Sprintf("%s answers 503 to %.0f%% of requests", prov, ratio*100)
	case "429":
		secs, err := strconv.Atoi(arg)
		if err != nil || secs < 1 {
			return demoFault{}, fmt.Errorf("--fault %q: 429 takes the Retry-After in whole seconds: 429:5", s)
		}
		f.fault = pushsim.Fault{Kind: pushsim.Throttle, Ratio: 1, RetryAfter: time.Duration(secs) * time.Second}
		f.label = fmt.Sprintf("%s throttles every request: 429, Retry-After %ds", prov, secs)
	case "none":
		return demoFault{}, nil
	default:
		return demoFault{}, fmt.Errorf("--fault %q: unknown fault %q (stall, 503:RATIO, 429:SECONDS, none)", s, kind)
	}
	return f, nil
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	var o demoOptions
	fault := fs.String("fault", "autopush=stall", "fault to inject halfway: `PROVIDER=stall|503:RATIO|429:SECONDS`, or none")
	fs.StringVar(&o.redisURL, "redis", "", "Redis `URL` to use (default: a throwaway redis-server when one is on PATH, else an in-process Redis)")
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long jobs are enqueued; the fault comes halfway")
	fs.IntVar(&o.rate, "rate", 200, "jobs enqueued per second, spread over the provider mix")
	fs.StringVar(&o.report, "report", "demo-report.html", "`FILE` for the HTML report; the chart also goes to the same name with .png")
	fs.StringVar(&o.payload, "payload", "Hello from webpush-gateway", "message `TEXT`")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	if err := noArgs(fs); err != nil {
		return 2
	}
	var err error
	if o.fault, err = parseDemoFault(*fault); err != nil {
		return exitUsage(err)
	}
	if o.duration < 2*time.Second || o.rate < 1 {
		return exitUsage(errors.New("--duration must be at least 2s and --rate at least 1"))
	}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			o.live = true
		}
	}
	if err := runDemo(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-worker demo:", err)
		return 1
	}
	return 0
}

// demoRedis picks the Redis the demo runs on and says which in its first line.
func demoRedis(ctx context.Context, o demoOptions, out io.Writer) (url string, stop func(), err error) {
	if o.redisURL != "" {
		fmt.Fprintf(out, "redis:   using %s\n", o.redisURL)
		return o.redisURL, func() {}, nil
	}
	// The worker's scripts need a real Redis 7 (script flags, XREADGROUP inside scripts): the
	// demo starts one, and says how to get it when it is missing.
	r, err := startLocalRedis(ctx)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, "redis:   started a throwaway redis-server at %s\n", r.url)
	return r.url, r.Stop, nil
}

// runDemo runs the real pipeline on one machine: Redis, pushsim, a steady stream of jobs across
// the providers, the worker, a live table, a fault halfway, and the report.
func runDemo(ctx context.Context, o demoOptions, out io.Writer) error {
	url, stopRedis, err := demoRedis(ctx, o, out)
	if err != nil {
		return err
	}
	defer stopRedis()
	sim, err := pushsim.Start(pushsim.Config{Lean: true, MaxDeliveries: 1000})
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintf(out, "pushsim: FCM, Autopush, Apple, WNS and %s on %s (TLS, HTTP/2)\n", demoGenericHost, sim.Addr())

	key, err := vapid.GenerateKey("default")
	if err != nil {
		return err
	}
	subs, err := demoSubscriptions(sim, key)
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
	main, blocking, err := stream.Connect(url, stream.ConnectOptions{ClientName: "gateway-demo", BlockingPoolSize: 16})
	if err != nil {
		return err
	}
	defer main.Close()
	defer blocking.Close()
	reg, err := loadRegistry("")
	if err != nil {
		return err
	}
	tf := transportFlags{
		connectTo: append(sim.ConnectTo(), net.JoinHostPort(demoGenericHost, "443")+"="+sim.Addr()),
		caFile:    sim.CAFile(), subject: "mailto:demo@webpush-gateway.example.com",
	}
	sender, err := tf.sender(reg)
	if err != nil {
		return err
	}
	defer sender.Close()
	store := stream.New(main, blocking, stream.Options{Prefix: prefix, Consumer: consumerName()})

	start := time.Now()
	rec := newDemoRecorder(start)
	wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		done <- dispatch.Run(wctx, dispatch.Config{
			Store: store, Sender: sender, Registry: reg, Keys: map[string]*vapid.Key{"default": key},
			Block: 100 * time.Millisecond, Grace: 2 * time.Second,
			Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnAttempt:       rec.attempt,
			OnBreakerChange: rec.breaker,
		})
	}()
	fault := "no fault"
	if o.fault.provider != "" {
		fault = fmt.Sprintf("at %s: %s", (o.duration / 2).Round(time.Second), o.fault.label)
	}
	fmt.Fprintf(out, "worker:  %d jobs/s for %s across fcm 72%%, autopush 19%%, apple 6%%, wns 3%%, self-hosted 2%%; %s\n\n",
		o.rate, o.duration, fault)

	enqErr := make(chan error, 1)
	ectx, stopEnqueue := context.WithCancel(ctx)
	defer stopEnqueue()
	go func() { enqErr <- demoEnqueue(ectx, stream.NewProducer(main, prefix, 1), subs, o, rec) }()

	table := &demoTable{out: out, live: o.live}
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
			if !faulted && o.fault.provider != "" && el >= o.duration/2 {
				if err := sim.SetFault(o.fault.provider, o.fault.fault); err != nil {
					runErr = err
					break loop
				}
				rec.faultAt(now)
				faulted = true
			}
			last := el >= o.duration
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
	counts, err := store.Counts(context.WithoutCancel(ctx))
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
	if err := store.DeadRecords(context.WithoutCancel(ctx), func(d stream.DeadRecord) { reasons[d.Code+": "+d.Reason]++ }); err != nil {
		return err
	}
	for _, r := range sortedKeys(reasons) {
		fmt.Fprintf(out, "  dead: %3d  %s\n", reasons[r], r)
	}
	return writeDemoReport(o, rec.report(end, o, url), out)
}

// demoSubscriptions makes the subscriptions jobs go to, spread as demoMix says.
func demoSubscriptions(sim *pushsim.Server, key *vapid.Key) ([]pushsim.Subscription, error) {
	var subs []pushsim.Subscription
	for _, m := range demoMix {
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

// demoEnqueue puts o.rate jobs a second on the intake stream until ctx ends, in small batches
// every 50 ms so the stream looks like steady traffic.
func demoEnqueue(ctx context.Context, p *stream.Producer, subs []pushsim.Subscription, o demoOptions, rec *demoRecorder) error {
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
			due := int(now.Sub(start).Seconds() * float64(o.rate))
			var lines [][]byte
			for ; n < due; n++ {
				s := subs[rng.IntN(len(subs))]
				b, err := json.Marshal(map[string]any{"id": fmt.Sprintf("demo-%06d", n), "subscription": s,
					"payload": fmt.Sprintf("%s #%d", o.payload, n), "ttl": 3600, "urgency": "normal",
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

// demoRecorder collects what the worker reports (every attempt, every breaker change) into
// one-second buckets per provider.
type demoRecorder struct {
	start time.Time

	mu       sync.Mutex
	queued   int                                 // guarded by mu
	accepted map[string][]int                    // guarded by mu; provider -> accepted per second
	codes    map[string]map[taxonomy.Code]int    // guarded by mu; provider -> outcome -> attempts
	lat      map[string][]time.Duration          // guarded by mu; enqueue -> accepted answer
	recent   map[string][]demoSample             // guarded by mu; the last seconds, for the live table
	breakers map[string][]demoreport.BreakerSpan // guarded by mu
	state    map[string]limits.State             // guarded by mu
	fault    time.Duration                       // guarded by mu; 0: none yet
}

type demoSample struct {
	at  time.Time
	lat time.Duration
}

func newDemoRecorder(start time.Time) *demoRecorder {
	r := &demoRecorder{start: start, accepted: map[string][]int{}, codes: map[string]map[taxonomy.Code]int{},
		lat: map[string][]time.Duration{}, recent: map[string][]demoSample{},
		breakers: map[string][]demoreport.BreakerSpan{}, state: map[string]limits.State{}}
	for _, p := range demoProviders {
		r.codes[p] = map[taxonomy.Code]int{}
		r.breakers[p] = []demoreport.BreakerSpan{{Provider: p, State: limits.Closed.String()}}
	}
	return r
}

func (r *demoRecorder) addEnqueued(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queued += n
}

func (r *demoRecorder) enqueued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.queued
}

func (r *demoRecorder) faultAt(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = max(t.Sub(r.start), time.Millisecond)
}

// attempt is dispatch.Config.OnAttempt.
func (r *demoRecorder) attempt(a dispatch.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.codes[a.Provider] == nil {
		r.codes[a.Provider] = map[taxonomy.Code]int{}
	}
	r.codes[a.Provider][a.Code]++
	if a.Code != taxonomy.Accepted {
		return
	}
	sec := max(0, int(a.At.Sub(r.start)/time.Second))
	s := r.accepted[a.Provider]
	for len(s) <= sec {
		s = append(s, 0)
	}
	s[sec]++
	r.accepted[a.Provider] = s
	d := a.At.Sub(a.Enqueued)
	r.lat[a.Provider] = append(r.lat[a.Provider], d)
	r.recent[a.Provider] = append(r.recent[a.Provider], demoSample{a.At, d})
}

// breaker is dispatch.Config.OnBreakerChange: it runs under the breaker's lock, and only
// records.
func (r *demoRecorder) breaker(provider string, _, to limits.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Since(r.start)
	spans := r.breakers[provider]
	if n := len(spans); n > 0 {
		spans[n-1].To = max(now, spans[n-1].From+time.Millisecond)
	}
	r.breakers[provider] = append(spans, demoreport.BreakerSpan{Provider: provider, State: to.String(), From: now})
	r.state[provider] = to
}

// demoRow is one provider's line of the live table.
type demoRow struct {
	provider   string
	perSec     float64
	p50, p99   time.Duration
	accepted   int
	other      map[taxonomy.Code]int
	breaker    string
	hasLatency bool
}

// snapshot is the live table at now: the rate over the last 3 seconds, the latency over the
// last 10.
func (r *demoRecorder) snapshot(now time.Time) []demoRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rows []demoRow
	for _, p := range demoProviders {
		recent := r.recent[p]
		for len(recent) > 0 && now.Sub(recent[0].at) > 10*time.Second {
			recent = recent[1:]
		}
		r.recent[p] = recent
		row := demoRow{provider: p, other: map[taxonomy.Code]int{}, breaker: r.state[p].String()}
		var lats []time.Duration
		for _, s := range recent {
			if now.Sub(s.at) <= 3*time.Second {
				row.perSec++
			}
			lats = append(lats, s.lat)
		}
		row.perSec /= 3
		if len(lats) > 0 {
			slices.Sort(lats)
			row.p50, row.p99, row.hasLatency = quantile(lats, 50), quantile(lats, 99), true
		}
		for c, n := range r.codes[p] {
			if c == taxonomy.Accepted {
				row.accepted = n
			} else {
				row.other[c] = n
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// quantile is the p-th percentile of sorted, which must not be empty: the value at or below
// which p % of them lie (nearest rank).
func quantile(sorted []time.Duration, p int) time.Duration {
	i := max(0, (len(sorted)*p+99)/100-1)
	return sorted[i]
}

// report turns the run into demoreport's model.
func (r *demoRecorder) report(end time.Time, o demoOptions, redisURL string) demoreport.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	dur := end.Sub(r.start)
	secs := int(dur / time.Second)
	rep := demoreport.Report{
		Title:     "webpush-gateway demo: provider isolation under a fault",
		Generated: end.UTC().Truncate(time.Second),
		Step:      time.Second,
		Duration:  time.Duration(secs) * time.Second,
		Setup: []string{
			fmt.Sprintf("%d jobs/s for %s across fcm 72%%, autopush 19%%, apple 6%%, wns 3%%, a self-hosted service 2%%", o.rate, o.duration),
			"Redis: " + redisURL + "; push services: pushsim over TLS and HTTP/2 on loopback; registry: the shipped registry.yaml",
			fmt.Sprintf("%d jobs enqueued", r.queued),
		},
	}
	if r.fault > 0 {
		rep.Fault = demoreport.Window{From: r.fault, Label: "fault: " + o.fault.label}
	}
	for _, p := range demoProviders {
		s := slices.Clone(r.accepted[p])
		for len(s) < secs {
			s = append(s, 0)
		}
		rates := make([]float64, secs)
		for i := range secs {
			rates[i] = float64(s[i])
		}
		rep.Series = append(rep.Series, demoreport.Series{Provider: p, Rate: rates})
		spans := slices.Clone(r.breakers[p])
		spans[len(spans)-1].To = 0
		rep.Breakers = append(rep.Breakers, spans...)
		sum := demoreport.ProviderSummary{Provider: p, Outcomes: map[string]int{}}
		for c, n := range r.codes[p] {
			sum.Outcomes[string(c)] = n
		}
		lats := slices.Clone(r.lat[p])
		sum.Sent = len(lats)
		if len(lats) > 0 {
			slices.Sort(lats)
			sum.P50, sum.P99 = quantile(lats, 50), quantile(lats, 99)
		}
		rep.Providers = append(rep.Providers, sum)
	}
	return rep
}

// demoTable prints the live per-provider table: in place on a terminal, every five seconds
// otherwise (a log, CI).
type demoTable struct {
	out     io.Writer
	live    bool
	lines   int // lines drawn last time, to move back over them
	printed int // without a terminal: the last five-second mark printed
}

// draw shows the table at elapsed; last is the final one, which is always printed.
func (t *demoTable) draw(rows []demoRow, elapsed time.Duration, faulted, last bool) {
	secs := int(elapsed.Round(time.Second) / time.Second)
	if !t.live && !last {
		// Every five seconds, by the mark passed rather than the exact second: a tick that
		// comes late on a busy machine must not skip a print.
		if secs/5 <= t.printed {
			return
		}
		t.printed = secs / 5
	}
	// On a terminal the table is redrawn over itself: up over the last one, each line cleared.
	var b strings.Builder
	erase := ""
	if t.live {
		erase = "\x1b[2K"
		if t.lines > 0 {
			fmt.Fprintf(&b, "\x1b[%dA", t.lines)
		}
	}
	state := ""
	if faulted {
		state = "  (fault injected)"
	}
	fmt.Fprintf(&b, "%st=%3ds%s\n", erase, secs, state)
	fmt.Fprintf(&b, "%s%-9s %8s %8s %8s %9s  %-9s  %s\n", erase, "PROVIDER", "SENT/S", "p50", "p99", "ACCEPTED", "BREAKER", "OTHER OUTCOMES (attempts)")
	for _, r := range rows {
		p50, p99 := "-", "-"
		if r.hasLatency {
			p50, p99 = fmtLatency(r.p50), fmtLatency(r.p99)
		}
		var other []string
		for _, c := range sortedCodes(r.other) {
			other = append(other, fmt.Sprintf("%s %d", c, r.other[c]))
		}
		line := fmt.Sprintf("%-9s %8.1f %8s %8s %9d  %-9s  %s", r.provider, r.perSec, p50, p99, r.accepted, r.breaker, strings.Join(other, ", "))
		fmt.Fprintf(&b, "%s%s\n", erase, strings.TrimRight(line, " "))
	}
	if !t.live {
		b.WriteString("\n")
	}
	fmt.Fprint(t.out, b.String())
	t.lines = len(rows) + 2
}

func fmtLatency(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return d.Round(time.Millisecond).String()
}

func sortedCodes(m map[taxonomy.Code]int) []taxonomy.Code {
	cs := make([]taxonomy.Code, 0, len(m))
	for c := range m {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i] < cs[j] })
	return cs
}

// writeDemoReport writes the HTML report and the PNG beside it.
func writeDemoReport(o demoOptions, rep demoreport.Report, out io.Writer) error {
	html, err := demoreport.HTML(rep)
	if err != nil {
		return err
	}
	png, err := demoreport.PNG(rep)
	if err != nil {
		return err
	}
	pngPath := strings.TrimSuffix(o.report, filepath.Ext(o.report)) + ".png"
	if err := os.MkdirAll(filepath.Dir(o.report), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.report, html, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(pngPath, png, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "report:  %s (open it in a browser; no network needed) and %s\n", o.report, pngPath)
	return nil
}
