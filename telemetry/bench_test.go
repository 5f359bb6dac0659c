package telemetry

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func benchMetrics(b *testing.B) (*prometheus.Registry, *Metrics) {
	b.Helper()
	reg := NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{Providers: testProviders, Keys: testKeys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return reg, m
}

// BenchmarkSend is the cost the dispatcher pays per delivery attempt for its outcome: one
// counter and one histogram observation with its exemplar.
func BenchmarkSend(b *testing.B) {
	_, m := benchMetrics(b)
	b.ReportAllocs()
	for b.Loop() {
		m.Send("fcm", ClassTransactional, "ACCEPTED", 80*time.Millisecond, "0190f6a4-7c2e-7d4b-9a51-3f0e8b2c1d77")
	}
}

// BenchmarkSendWait is what it pays as the send starts: one observation of the wait before
// it.
func BenchmarkSendWait(b *testing.B) {
	_, m := benchMetrics(b)
	b.ReportAllocs()
	for b.Loop() {
		m.SendWait("fcm", ClassTransactional, 40*time.Millisecond)
	}
}

// BenchmarkSendNoJobID is the same without an exemplar.
func BenchmarkSendNoJobID(b *testing.B) {
	_, m := benchMetrics(b)
	b.ReportAllocs()
	for b.Loop() {
		m.Send("fcm", ClassTransactional, "ACCEPTED", 80*time.Millisecond, "")
	}
}

// BenchmarkSendParallel is BenchmarkSend from every core at once, on one provider's series.
func BenchmarkSendParallel(b *testing.B) {
	_, m := benchMetrics(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Send("fcm", ClassTransactional, "ACCEPTED", 80*time.Millisecond, "0190f6a4-7c2e-7d4b-9a51-3f0e8b2c1d77")
		}
	})
}

// BenchmarkScrape is one /metrics request in the text format with every series of five
// providers, four shards of queue statistics (both lanes of every provider), and the Go and
// process collectors.
func BenchmarkScrape(b *testing.B) {
	reg, m := benchMetrics(b)
	populate(m)
	var stats []QueueStat
	for s := range 4 {
		for _, st := range []string{StreamIntake, StreamDelayed, StreamDead, StreamResults, StreamGone} {
			stats = append(stats, QueueStat{Shard: s, Stream: st, Entries: 10, Lag: 1, HasPending: true, OldestPendingAge: time.Second})
		}
		for _, p := range testProviders {
			stats = append(stats, QueueStat{Shard: s, Stream: lanePrefix + p, Entries: 10, Lag: 1},
				QueueStat{Shard: s, Stream: lanePrefix + p + bulkLaneSuffix, Entries: 10, Lag: 1})
		}
	}
	m.SetQueueStats(stats, t0)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
	req := httptest.NewRequest("GET", MetricsPath, nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		_, _ = io.Copy(io.Discard, w.Body)
	}
}
