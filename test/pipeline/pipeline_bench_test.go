// Package pipeline_test measures the whole pipeline on one machine: jobs enqueued on Redis
// Streams, the worker's intake and lanes (dispatch.Run, in this process), sends over TLS and
// HTTP/2 to pushsim, and the ledger. It reports jobs per second and what each job costs Redis:
// the commands it executes (INFO commandstats, commands run inside scripts included) and the
// round trips the worker makes (counted by a go-redis hook).
//
//	go test -run '^$' -bench BenchmarkPipeline -benchtime 3x ./test/pipeline/
package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/dispatch"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

const jobsPerRound = 2000

// TestPipelineSmoke runs one short round of the benchmark's pipeline so that it cannot rot
// between benchmark runs: every job must reach the ledger as ACCEPTED.
func TestPipelineSmoke(t *testing.T) {
	p := startPipeline(t)
	lines := p.round(0, 200)
	if _, err := p.producer.Enqueue(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
	p.waitLedger(t, 200)
	accepted := 0
	if err := p.insp.Results(context.Background(), func(r stream.Result) {
		if r.Code == "ACCEPTED" {
			accepted++
		}
	}); err != nil {
		t.Fatal(err)
	}
	if accepted != 200 {
		t.Fatalf("%d of 200 jobs ACCEPTED", accepted)
	}
}

// pipeline is Redis, pushsim and a running worker, with the counters the benchmark reads.
type pipeline struct {
	srv      *redistest.Server
	store    *stream.Store
	insp     *inspect.Inspector // the operators' view of the same Redis: counts, ledger
	producer *stream.Producer
	subs     []job.Subscription
	rt       *stream.CallCounter
	poll     *redis.Client
	ledger   string
}

func startPipeline(tb testing.TB) *pipeline {
	tb.Helper()
	return startPipelineWith(tb, stream.Options{Consumer: "bench", CommitLinger: stream.DefaultCommitLinger}, pushsim.Config{Dir: tb.TempDir(), MaxDeliveries: 10})
}

// startPipelineWith is startPipeline with the worker's store options and pushsim's config.
func startPipelineWith(tb testing.TB, so stream.Options, simCfg pushsim.Config, redisOpts ...redistest.Option) *pipeline {
	tb.Helper()
	srv := redistest.Start(tb, redisOpts...)
	sim, err := pushsim.Start(simCfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sim.Close() })
	key, err := vapid.GenerateKey("default")
	if err != nil {
		tb.Fatal(err)
	}
	reg, err := providers.Parse("registry.yaml", webpushgateway.DefaultRegistry)
	if err != nil {
		tb.Fatal(err)
	}
	sender := simtest.Sender(tb, sim, reg, "push.example.net")
	rt := &stream.CallCounter{}
	store, err := stream.Open(srv.URL(), stream.OpenOptions{Options: so, BlockingPoolSize: 16, Hooks: []redis.Hook{rt}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- dispatch.Run(ctx, dispatch.Config{Store: store, Sender: sender, Registry: reg,
			Keys: map[string]*vapid.Key{"default": key}, Block: 50 * time.Millisecond,
			// What 0 would switch off is set as the worker's flags set it.
			Backoff: dispatch.Backoff{MaxRetries: dispatch.DefaultMaxRetries}, LaneGather: dispatch.DefaultLaneGather,
			MaxDelayed: dispatch.DefaultMaxDelayed, MaxPerRecipient: dispatch.DefaultMaxPerRecipient,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})

	p := &pipeline{srv: srv, store: store, insp: inspect.New(srv.Client(tb), so), subs: subscriptions(tb, sim, key), rt: rt}
	p.producer = stream.NewProducer(srv.Client(tb), "", 1)
	p.poll, p.ledger = srv.Client(tb), store.Keys(0).Results
	return p
}

// round makes n jobs with ids unique to round i.
func (p *pipeline) round(i, n int) [][]byte {
	lines := make([][]byte, n)
	for j := range lines {
		lines[j], _ = json.Marshal(map[string]any{"id": fmt.Sprintf("r%d-%05d", i, j),
			"subscription": p.subs[j%len(p.subs)], "payload": `{"title":"Your order shipped","body":"Order 4417 arrives Thursday."}`, "ttl": 3600})
	}
	return lines
}

// waitLedger polls Redis until the ledger holds want records; it returns how many polls that took.
func (p *pipeline) waitLedger(tb testing.TB, want int64) int64 {
	polls := int64(0)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n, err := p.poll.XLen(context.Background(), p.ledger).Result()
		polls++
		if err != nil {
			tb.Fatal(err)
		}
		if n >= want {
			return polls
		}
		if time.Now().After(deadline) {
			tb.Fatalf("ledger holds %d records after 2 minutes, want %d", n, want)
		}
		time.Sleep(10 * time.Millisecond) // polling Redis for the ledger to fill
	}
}

func BenchmarkPipeline(b *testing.B) {
	p := startPipeline(b)
	srv, insp, rt := p.srv, p.insp, p.rt

	var jobs, rounds, cmds int64
	perCmd := map[string]int64{}
	var busy time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		lines := p.round(i, jobsPerRound)
		srv.ResetStats(b)
		before := rt.RoundTrips()
		b.StartTimer()
		start := time.Now()
		if _, err := p.producer.Enqueue(context.Background(), lines...); err != nil {
			b.Fatal(err)
		}
		polls := p.waitLedger(b, int64((i+1)*jobsPerRound))
		busy += time.Since(start)
		b.StopTimer()
		rounds += rt.RoundTrips() - before
		for name, n := range srv.CommandStats(b) {
			if name == "info" || name == "config|resetstat" || name == "config" || strings.HasPrefix(name, "client") || name == "hello" || name == "ping" {
				continue
			}
			perCmd[name] += n
			cmds += n
		}
		// The poller's own reads are not the pipeline's work.
		perCmd["xlen"] -= polls
		cmds -= polls
		jobs += jobsPerRound
		b.StartTimer()
	}
	b.StopTimer()
	if c, err := insp.Counts(context.Background()); err != nil || c["dead"] != 0 {
		b.Fatalf("dead-lettered: %v %v", c["dead"], err)
	}
	b.ReportMetric(float64(jobs)/busy.Seconds(), "jobs/s")
	b.ReportMetric(float64(rounds)/float64(jobs), "worker-round-trips/job")
	b.ReportMetric(float64(cmds)/float64(jobs), "redis-commands/job")
	names := make([]string, 0, len(perCmd))
	for n := range perCmd {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", n, float64(perCmd[n])/float64(jobs)))
	}
	b.Logf("commands per job (commandstats, scripts' inner calls included, the benchmark's polling taken out): %s", strings.Join(parts, ", "))
}

// subscriptions makes 100 subscriptions over the market mix of push services.
func subscriptions(b testing.TB, sim *pushsim.Server, key *vapid.Key) []job.Subscription {
	var subs []job.Subscription
	for _, m := range []struct {
		p, host string
		n       int
	}{{"fcm", "", 72}, {"autopush", "", 19}, {"apple", "", 6}, {"wns", "", 3}, {"generic", "push.example.net", 2}} {
		for range m.n {
			s, err := sim.Subscribe(m.p, m.host, key.PublicKey())
			if err != nil {
				b.Fatal(err)
			}
			subs = append(subs, s)
		}
	}
	return subs
}
