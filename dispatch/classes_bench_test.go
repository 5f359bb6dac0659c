package dispatch

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// BenchmarkTransactionalWait measures the enqueue-to-send time of transactional jobs on FCM held
// to 50 requests a second, alone and behind a bulk backlog of more than a minute's work on the
// same provider (the target: p99 behind the backlog at most 1.5x p99 alone). Each run sends
// the same 100 transactional jobs, one every 30 ms; run it with -benchtime=1x.
func BenchmarkTransactionalWait(b *testing.B) {
	for _, backlog := range []int{0, 4000} {
		b.Run(fmt.Sprintf("bulk_backlog=%d", backlog), func(b *testing.B) {
			for range b.N {
				p50, p99 := transactionalWaits(b, backlog)
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
			}
		})
	}
}

func transactionalWaits(b *testing.B, backlog int) (p50, p99 time.Duration) {
	b.StopTimer()
	e := newEnv(b, envOptions{wallClock: true, registry: testRegistry(map[string]string{"fcm": "rate: 50\nburst: 10"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	var bulk [][]byte
	for i := range backlog {
		bulk = append(bulk, job(fmt.Sprintf("bulk-%d", i), sub, "newsletter", "class", "bulk"))
	}
	for len(bulk) > 0 {
		n := min(len(bulk), 1000)
		e.enqueue(bulk[:n]...)
		bulk = bulk[n:]
	}
	w := e.start(e.config(e.store))
	defer w.stop()
	if backlog > 0 {
		waitFor(b, "the bulk backlog to start moving", func() bool { return len(e.sentAt(pushsim.FCM)) >= 100 })
	} else {
		time.Sleep(time.Second) // the worker's start, as the backlog's run has it
	}
	b.StartTimer()
	const jobs = 100
	enqueued := make(map[string]time.Time, jobs)
	for i := range jobs {
		id := fmt.Sprintf("tx-%d", i)
		enqueued[id] = time.Now()
		e.enqueue(job(id, sub, "your code is 1234"))
		time.Sleep(30 * time.Millisecond)
	}
	waitFor(b, "every transactional job sent", func() bool {
		sent := 0
		for _, d := range e.sim.Deliveries() {
			if _, ok := enqueued[d.JobID]; ok {
				sent++
			}
		}
		return sent == jobs
	})
	b.StopTimer()
	var waits []time.Duration
	for _, d := range e.sim.Deliveries() {
		if at, ok := enqueued[d.JobID]; ok {
			waits = append(waits, d.At.Sub(at))
		}
	}
	slices.Sort(waits)
	return waits[len(waits)/2], waits[len(waits)*99/100]
}

// BenchmarkClassCPU measures the test process's CPU per message (the worker and pushsim, which
// runs in it; Redis is a process of its own) for 2,000 jobs of each class sent unthrottled:
// bulk jobs should cost what transactional ones (today's jobs) do.
func BenchmarkClassCPU(b *testing.B) {
	for _, class := range []string{"", "bulk"} {
		name := "class=transactional(none given)"
		if class != "" {
			name = "class=" + class
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.ReportMetric(classCPU(b, class), "cpu_us/msg")
			}
		})
	}
}

func classCPU(b *testing.B, class string) float64 {
	b.StopTimer()
	e := newEnv(b, envOptions{wallClock: true, registry: testRegistry(map[string]string{"fcm": "rate: 1000000\nburst: 100000\nmax_in_flight: 256"})})
	sub := e.subscribe(pushsim.FCM, e.key)
	const jobs = 2000
	var lines [][]byte
	for i := range jobs {
		var extra []any
		if class != "" {
			extra = []any{"class", class}
		}
		lines = append(lines, job(fmt.Sprintf("j-%d", i), sub, "hello", extra...))
	}
	for i := 0; i < len(lines); i += 1000 {
		e.enqueue(lines[i:min(i+1000, len(lines))]...)
	}
	before := cpuTime()
	b.StartTimer()
	w := e.start(e.config(e.store))
	waitFor(b, "every job recorded", func() bool { return len(e.all("results")) == jobs })
	b.StopTimer()
	used := cpuTime() - before
	_ = w.stop()
	return float64(used.Microseconds()) / jobs
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
