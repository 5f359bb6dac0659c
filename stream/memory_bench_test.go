package stream

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// BenchmarkRedisMemoryPerJob is what a job costs Redis's memory in each place it can be: queued
// in the intake, in its lane (with its jobs-index entry), waiting to retry (the delayed set, its
// data and its jobs-index entry), and once accepted: its ledger record and its field in the
// duplicate-suppression window. Jobs of the test's usual shape (a 256-byte JSON job), 20,000 of
// each; used_memory deltas for the places a job leaves when it moves on, MEMORY USAGE of the
// keys for the ledger and the window.
//
//	go test -run '^$' -bench BenchmarkRedisMemoryPerJob -benchtime 1x ./stream/
func BenchmarkRedisMemoryPerJob(b *testing.B) {
	const n = 20_000
	c, s := benchStore(b)
	ctx := context.Background()
	k := s.Keys(0)
	used := func() int64 {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		v, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	usage := func(keys ...string) int64 {
		var total int64
		for _, key := range keys {
			v, err := c.MemoryUsage(ctx, key, 0).Result()
			if err != nil && err != redis.Nil {
				b.Fatal(err)
			}
			total += v
		}
		return total
	}
	per := func(bytes int64) float64 { return float64(bytes) / n }
	var jobBytes int
	batch := func(round string) [][]byte {
		var lines [][]byte
		for i := range n {
			lines = append(lines, []byte(validJob(fmt.Sprintf("%s-%06d", round, i))))
		}
		jobBytes = len(lines[0])
		return lines
	}
	enqueue := func(lines [][]byte) {
		for i := 0; i < len(lines); i += 1000 {
			if _, err := NewProducer(c, "", 1).Enqueue(ctx, lines[i:min(i+1000, len(lines))]...); err != nil {
				b.Fatal(err)
			}
		}
	}
	toLanes := func() {
		for moved := 0; moved < n; {
			in, _, err := s.ReadIntake(ctx, 0, job.ClassTransactional, 100, 0)
			if err != nil || len(in) == 0 {
				b.Fatalf("ReadIntake: %d entries, %v", len(in), err)
			}
			all(b, in, func(e Entry) error {
				_, err := s.ToLane(ctx, e, "fcm", job.ClassTransactional, jobID(e.Fields["job"]), e.Fields["job"], ms(t0))
				return err
			})
			moved += len(in)
		}
	}
	fromLane := func(op func(Entry) error) {
		for done := 0; done < n; {
			es, err := s.readLane(ctx, 0, "fcm", job.ClassTransactional, 100, 0)
			if err != nil || len(es) == 0 {
				b.Fatalf("ReadLane: %d entries, %v", len(es), err)
			}
			all(b, es, op)
			done += len(es)
		}
	}
	b.ResetTimer()
	for range b.N {
		m0 := used()
		enqueue(batch("q"))
		queued := used() - m0
		toLanes()
		inLane := used() - m0
		fromLane(func(e Entry) error {
			_, err := s.ToDelayed(ctx, e, RetryRecord{ID: jobID(e.Fields["job"]), Provider: "fcm", Due: t0.Add(time.Hour),
				Attempt: 1, Job: e.Fields["job"], EnqueuedAtMs: ms(t0)})
			return err
		})
		delayed := used() - m0
		if err := c.Del(ctx, k.Delayed, k.DelayedData, k.Jobs).Err(); err != nil {
			b.Fatal(err)
		}
		enqueue(batch("a"))
		toLanes()
		fromLane(func(e Entry) error {
			_, err := s.Finish(ctx, e, Result{ID: jobID(e.Fields["job"]), Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0})
			return err
		})
		buckets, err := c.Keys(ctx, k.Window+":*").Result()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(jobBytes), "job-bytes")
		b.ReportMetric(per(queued), "B/queued-job")
		b.ReportMetric(per(inLane), "B/lane-job")
		b.ReportMetric(per(delayed), "B/delayed-job")
		b.ReportMetric(per(usage(k.Results)), "B/ledger-record")
		b.ReportMetric(per(usage(append(buckets, k.Window)...)), "B/window-job")
		if err := c.FlushDB(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		if err := s.Setup(ctx, []string{"fcm"}); err != nil {
			b.Fatal(err)
		}
	}
}
