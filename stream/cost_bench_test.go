package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// BenchmarkRedisCPUPerJob is what each step of a job's happy path costs the Redis server in CPU
// (INFO cpu), per job, with the moves and records of a batch of jobs issued at once as a
// worker's goroutines issue them (the group commit merges them). AOF is off: its fsyncs are
// the disk's cost, not the commands'.
//
//	go test -run '^$' -bench BenchmarkRedisCPUPerJob -benchtime 20x ./stream/
func BenchmarkRedisCPUPerJob(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			c, s := benchStore(b)
			ctx := context.Background()
			steps := []string{"enqueue", "read intake", "to lane", "read lane", "finish"}
			spent := make([]time.Duration, len(steps))
			jobs := 0
			for i := range b.N {
				var lines [][]byte
				for j := range batch {
					lines = append(lines, []byte(validJob(fmt.Sprintf("r%d-%d", i, j))))
				}
				var in, lane []Entry
				for k, step := range []func(){
					func() {
						if _, err := NewProducer(c, "", 1).Enqueue(ctx, lines...); err != nil {
							b.Fatal(err)
						}
					},
					func() { in, _, _ = s.ReadIntake(ctx, 0, job.ClassTransactional, batch, 0) },
					func() {
						all(b, in, func(e Entry) error {
							_, err := s.ToLane(ctx, e, "fcm", job.ClassTransactional, jobID(e.Fields["job"]), e.Fields["job"], ms(t0))
							return err
						})
					},
					func() { lane, _ = s.readLane(ctx, 0, "fcm", job.ClassTransactional, batch, 0) },
					func() {
						all(b, lane, func(e Entry) error {
							_, err := s.Finish(ctx, e, Result{ID: jobID(e.Fields["job"]), Provider: "fcm", Code: "ACCEPTED", Status: 201, Sent: true, At: t0})
							return err
						})
					},
				} {
					before := redisCPU(b, c)
					step()
					spent[k] += redisCPU(b, c) - before
				}
				if len(in) != batch || len(lane) != batch {
					b.Fatalf("read %d intake and %d lane entries, want %d", len(in), len(lane), batch)
				}
				jobs += batch
			}
			var total time.Duration
			for k, step := range steps {
				total += spent[k]
				b.ReportMetric(float64(spent[k].Microseconds())/float64(jobs), "µs/job-"+strings.ReplaceAll(step, " ", "-"))
			}
			b.ReportMetric(float64(total.Microseconds())/float64(jobs), "redis-µs/job")
		})
	}
}

// redisCPU is the server's user+system CPU so far (INFO cpu).
func redisCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(infoField(info, f), 64)
		if err != nil {
			b.Fatalf("INFO cpu %s: %v", f, err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second))
}
