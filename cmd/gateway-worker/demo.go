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
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// demoGenericHost stands for a self-hosted push service the registry does not know.
const demoGenericHost = "push.example.net"

// demoMix is how subscriptions spread over push services: roughly the browser market.
var demoMix = []struct {
	provider, host string
	subs           int
}{
	{"fcm", "", 72}, {"autopush", "", 19}, {"apple", "", 6}, {"wns", "", 3}, {"generic", demoGenericHost, 2},
}

type demoOptions struct {
	redisURL string
	jobs     int
	payload  string
}

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	var o demoOptions
	fs.StringVar(&o.redisURL, "redis", "", "Redis `URL` to use (default: start a throwaway redis-server)")
	fs.IntVar(&o.jobs, "jobs", 2000, "jobs in the burst")
	fs.StringVar(&o.payload, "payload", "Hello from webpush-gateway", "message `TEXT`")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	if err := noArgs(fs); err != nil {
		return 2
	}
	if err := runDemo(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-worker demo:", err)
		return 1
	}
	return 0
}

// runDemo runs the real pipeline on one machine: Redis, pushsim, a burst of jobs across the
// providers (with a few that must fail, to show where they end), the worker, and a summary
// read back from the ledger.
func runDemo(ctx context.Context, o demoOptions, out io.Writer) error {
	if o.redisURL == "" {
		r, err := startLocalRedis(ctx)
		if err != nil {
			return err
		}
		defer r.Stop()
		o.redisURL = r.url
		fmt.Fprintf(out, "redis:   started a throwaway redis-server at %s\n", r.url)
	} else {
		fmt.Fprintf(out, "redis:   using %s\n", o.redisURL)
	}
	sim, err := pushsim.Start(pushsim.Config{MaxDeliveries: o.jobs + 100})
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintf(out, "pushsim: FCM, Autopush, Apple, WNS and %s on %s (TLS, HTTP/2)\n", demoGenericHost, sim.Addr())

	key, err := vapid.GenerateKey("default")
	if err != nil {
		return err
	}
	lines, err := demoJobs(sim, key, o)
	if err != nil {
		return err
	}

	// A prefix of its own, so the demo never touches a real deployment's keys on a shared Redis.
	prefix := fmt.Sprintf("wpdemo%d", time.Now().UnixNano()%1_000_000)
	main, blocking, err := stream.Connect(o.redisURL, stream.ConnectOptions{ClientName: "gateway-demo", BlockingPoolSize: 16})
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
	wctx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- dispatch.Run(wctx, dispatch.Config{
			Store: store, Sender: sender, Registry: reg, Keys: map[string]*vapid.Key{"default": key},
			Block: 100 * time.Millisecond, Grace: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()

	start := time.Now()
	if _, err := stream.NewProducer(main, prefix, 1).Enqueue(ctx, lines...); err != nil {
		stopWorker()
		<-done
		return err
	}
	fmt.Fprintf(out, "worker:  %d jobs enqueued; delivering...\n", len(lines))
	finished, err := waitFinished(ctx, store, len(lines), 2*time.Minute)
	elapsed := time.Since(start)
	stopWorker()
	if werr := <-done; werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "         %d jobs reached a terminal record in %s (%.0f jobs/s)\n\n", finished, elapsed.Round(time.Millisecond), float64(finished)/elapsed.Seconds())
	return demoReport(ctx, out, store, sim)
}

// demoJobs builds the burst: jobs spread over subscriptions in demoMix, one subscription that
// has expired (GONE) and two jobs that are invalid (dead-lettered with their reason).
func demoJobs(sim *pushsim.Server, key *vapid.Key, o demoOptions) ([][]byte, error) {
	var subs []pushsim.Subscription
	for _, m := range demoMix {
		for range m.subs {
			s, err := sim.Subscribe(m.provider, m.host, key.PublicKey())
			if err != nil {
				return nil, err
			}
			subs = append(subs, s)
		}
	}
	sim.Expire(subs[80].Endpoint) // an Autopush subscription the browser dropped: its jobs end GONE
	rng := rand.New(rand.NewPCG(1, 2))
	lines := make([][]byte, 0, o.jobs+3)
	add := func(v map[string]any) error {
		b, err := json.Marshal(v)
		lines = append(lines, b)
		return err
	}
	for i := range o.jobs {
		s := subs[rng.IntN(len(subs))]
		if err := add(map[string]any{"id": fmt.Sprintf("demo-%05d", i), "subscription": s,
			"payload": fmt.Sprintf("%s #%d", o.payload, i), "ttl": 3600, "urgency": "normal"}); err != nil {
			return nil, err
		}
	}
	bad := subs[0]
	bad.Endpoint = strings.Replace(bad.Endpoint, "https://", "http://", 1)
	if err := add(map[string]any{"id": "demo-bad-http", "subscription": bad, "payload": "x"}); err != nil {
		return nil, err
	}
	if err := add(map[string]any{"id": "demo-bad-ttl", "subscription": subs[1], "payload": "x", "ttl": -5}); err != nil {
		return nil, err
	}
	return lines, nil
}

// waitFinished polls the store until n jobs have a ledger or dead record.
func waitFinished(ctx context.Context, s *stream.Store, n int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		c, err := s.Counts(ctx)
		if err == nil && int(c["results"]+c["dead"]) >= n {
			return int(c["results"] + c["dead"]), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("only %d of %d jobs finished within %s (%v)", c["results"]+c["dead"], n, limit, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// demoReport prints the per-provider summary from the ledger and the dead-letter reasons.
func demoReport(ctx context.Context, out io.Writer, s *stream.Store, sim *pushsim.Server) error {
	type row struct {
		codes     map[string]int
		latencies []time.Duration
	}
	rows := map[string]*row{}
	if err := s.Results(ctx, func(r stream.Result) {
		rw := rows[r.Provider]
		if rw == nil {
			rw = &row{codes: map[string]int{}}
			rows[r.Provider] = rw
		}
		rw.codes[r.Code]++
		rw.latencies = append(rw.latencies, r.Latency)
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "%-9s %6s %9s %6s %6s %8s %8s\n", "PROVIDER", "JOBS", "ACCEPTED", "GONE", "OTHER", "p50", "p99")
	ids := make([]string, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return len(rows[ids[i]].latencies) > len(rows[ids[j]].latencies) })
	for _, id := range ids {
		rw := rows[id]
		n := len(rw.latencies)
		slices.Sort(rw.latencies)
		other := n - rw.codes["ACCEPTED"] - rw.codes["GONE"]
		fmt.Fprintf(out, "%-9s %6d %9d %6d %6d %8s %8s\n", id, n, rw.codes["ACCEPTED"], rw.codes["GONE"], other,
			pct(rw.latencies, 50), pct(rw.latencies, 99))
	}
	reasons := map[string]int{}
	if err := s.DeadRecords(ctx, func(d stream.DeadRecord) { reasons[d.Code+": "+d.Reason]++ }); err != nil {
		return err
	}
	if len(reasons) > 0 {
		fmt.Fprintln(out, "\ndead-lettered, with their reasons:")
		for r, n := range reasons {
			fmt.Fprintf(out, "  %3d  %s\n", n, r)
		}
	}
	accepted := 0
	for _, d := range sim.Deliveries() {
		if d.Code == "ACCEPTED" {
			accepted++
		}
	}
	fmt.Fprintf(out, "\npushsim decrypted %d messages.\n", accepted)
	if accepted == 0 {
		return errors.New("no message was delivered")
	}
	return nil
}

func pct(sorted []time.Duration, p int) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	if sorted[i] < time.Millisecond {
		return "<1ms" // the ledger keeps whole milliseconds
	}
	return sorted[i].Round(time.Millisecond).String()
}
