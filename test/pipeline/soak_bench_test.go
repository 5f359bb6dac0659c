package pipeline_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

var (
	soakFor  = flag.Duration("soak", 10*time.Minute, "how long BenchmarkSoak feeds the pipeline")
	soakRate = flag.Int("soak-rate", 400, "jobs per second BenchmarkSoak enqueues")
)

// Windows of the soak: the duplicate-suppression window and the ledger's bound are set so that
// both fill within the soak's first minutes; from then on what the worker and Redis hold must
// stay flat.
const (
	soakSentTTL   = 2 * time.Minute
	soakLedgerMax = 50_000
	soakEvery     = 30 * time.Second
)

// BenchmarkSoak feeds the whole pipeline (redis-server, dispatch.Run and pushsim in this
// process) at a steady rate for -soak (10 minutes) and samples, every 30 s, this process's
// resident set and goroutines and Redis's used memory. Once the windows are full (the
// duplicate-suppression window after its TTL, the ledger at its bound) each of them must stay
// flat: the benchmark reports how much each grew over the second half of the run and fails
// when Redis, the goroutines or the resident set grew with the jobs.
//
//	go test -run '^$' -bench BenchmarkSoak -benchtime 1x -timeout 30m ./test/pipeline/
func BenchmarkSoak(b *testing.B) {
	p := startPipelineWith(b,
		stream.Options{Consumer: "soak", SentTTL: soakSentTTL, ResultsMaxLen: soakLedgerMax, CommitLinger: stream.DefaultCommitLinger},
		pushsim.Config{Dir: b.TempDir(), MaxDeliveries: 10, Sample: 50, Lean: true},
		redistest.WithConfig("appendfsync", "everysec"))
	ctx := context.Background()
	type sample struct {
		at         time.Duration
		jobs       int64
		rssMB      float64
		goroutines int
		redisMB    float64
		ledger     int64
	}
	var samples []sample
	take := func(at time.Duration, jobs int64) {
		info, err := p.poll.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		used, _ := strconv.ParseFloat(infoValue(info, "used_memory"), 64)
		ledger, err := p.poll.XLen(ctx, p.ledger).Result()
		if err != nil {
			b.Fatal(err)
		}
		samples = append(samples, sample{at: at, jobs: jobs, rssMB: rssMB(b), goroutines: runtime.NumGoroutine(),
			redisMB: used / (1 << 20), ledger: ledger})
	}
	for range b.N {
		start := time.Now()
		tick := time.NewTicker(100 * time.Millisecond)
		perTick := max(1, *soakRate/10)
		var sent int64
		take(0, 0)
		next := soakEvery
		for time.Since(start) < *soakFor {
			<-tick.C
			lines := p.round(int(sent), perTick)
			for j := range lines {
				lines[j] = []byte(strings.Replace(string(lines[j]), `"id":"r`, fmt.Sprintf(`"id":"s%d-r`, sent), 1))
			}
			if _, err := p.producer.Enqueue(ctx, lines...); err != nil {
				b.Fatal(err)
			}
			sent += int64(perTick)
			if time.Since(start) >= next {
				take(time.Since(start).Round(time.Second), sent)
				next += soakEvery
			}
		}
		tick.Stop()
	}
	b.StopTimer()
	b.Logf("%-8s %9s %8s %11s %9s %8s", "at", "enqueued", "RSS MB", "goroutines", "Redis MB", "ledger")
	for _, s := range samples {
		b.Logf("%-8s %9d %8.1f %11d %9.1f %8d", s.at, s.jobs, s.rssMB, s.goroutines, s.redisMB, s.ledger)
	}
	if len(samples) < 4 {
		b.Fatalf("%d samples: run for at least %s", len(samples), 4*soakEvery)
	}
	mid, last := samples[len(samples)/2], samples[len(samples)-1]
	b.ReportMetric(last.rssMB-mid.rssMB, "RSS-MB-growth-2nd-half")
	b.ReportMetric(float64(last.goroutines-mid.goroutines), "goroutines-growth-2nd-half")
	b.ReportMetric(last.redisMB-mid.redisMB, "Redis-MB-growth-2nd-half")
	b.ReportMetric(float64(last.jobs-mid.jobs), "jobs-2nd-half")
	// Flat: Redis within 10 % of its size at mid-run (the window and the ledger each drop what
	// they take in). The goroutines and the resident set follow the sends in flight, which
	// follow how fast pushsim answers on a shared machine: a leak doubles them, load does not.
	if mid.at >= soakSentTTL+time.Minute && (last.redisMB > 1.1*mid.redisMB || last.goroutines > 2*mid.goroutines || last.rssMB > 1.5*mid.rssMB) {
		b.Errorf("grew over the second half: Redis %.1f -> %.1f MB, goroutines %d -> %d, RSS %.1f -> %.1f MB",
			mid.redisMB, last.redisMB, mid.goroutines, last.goroutines, mid.rssMB, last.rssMB)
	}
}

// rssMB is this process's resident set (VmRSS), in MiB.
func rssMB(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("/proc/self/status: no VmRSS")
	return 0
}

// infoValue is field's value in an INFO reply.
func infoValue(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
