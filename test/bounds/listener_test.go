package bounds_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

const genericHost = "push.example.net"

// TestListenerFloodLeavesDeliveryItsDescriptors runs the worker under a descriptor limit of
// 1,024 and floods its HTTP listener with 2,000 keep-alive clients that each ask for /livez and
// then sit on their connection, reconnecting whenever it is closed. Meanwhile 100 jobs to every
// provider must all be sent, the listener must hold no more than its cap, /livez and /metrics
// must answer during the flood, and /livez after it.
func TestListenerFloodLeavesDeliveryItsDescriptors(t *testing.T) {
	const (
		nofile = 1024
		flood  = 2000
		jobs   = 100
	)
	rg := newRig(t)
	rg.args = append(rg.args, "--job-id-header", "X-Job-Id", "--connect-to", genericHost+":443="+rg.sim.Addr())
	rg.start(nofile)
	addr := rg.httpAddr()
	rg.waitReady(addr)
	before := rg.usage(addr)
	t.Logf("before the flood: %s", before)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var connected, answered atomic.Int64
	for range flood {
		wg.Go(func() { idleClient(ctx, addr, &connected, &answered) })
	}
	defer func() { stop(); wg.Wait() }()
	end := time.Now().Add(30 * time.Second)
	for connected.Load() < flood && time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond) // polling counters the flood's goroutines keep
	}
	time.Sleep(2 * time.Second) // the flood settles on the listener before any job arrives
	during := rg.usage(addr)
	t.Logf("flood of %d clients (%d connections made, %d answered): %s", flood, connected.Load(), answered.Load(), during)

	lines, ids := rg.everyProviderJobs(jobs)
	start := time.Now()
	rg.enqueue(lines)
	rg.waitDone(ids, 60*time.Second)
	sent := map[string]bool{}
	for _, d := range rg.sim.Deliveries() {
		if d.Code == "ACCEPTED" {
			sent[d.JobID] = true
		}
	}
	var unsent []string
	for _, id := range ids {
		if !sent[id] {
			unsent = append(unsent, id)
		}
	}
	loaded := rg.usage(addr)
	t.Logf("%d jobs with a terminal record in %s under the flood (%d connections made, %d answered): %s",
		jobs, time.Since(start).Round(time.Millisecond), connected.Load(), answered.Load(), loaded)
	if len(unsent) > 0 {
		t.Errorf("%d of %d jobs not accepted by the push service: %s", len(unsent), jobs, strings.Join(unsent[:min(5, len(unsent))], ", "))
	}
	for _, u := range []usage{during, loaded} {
		if u.metricsErr != nil {
			t.Errorf("GET /metrics during the flood: %v", u.metricsErr)
		}
	}
	// The listener holds its cap plus one; the rest is the worker's own (Redis, push
	// connections, files), which before the flood it had already.
	cap := telemetry.ListenerConns(nofile) + 1
	const slack = 32
	if limit := before.fds + cap + slack; during.fds > limit || loaded.fds > limit {
		t.Errorf("%d and %d descriptors under the flood, want at most %d (%d before, the listener's %d, %d slack)", during.fds, loaded.fds, limit, before.fds, cap, slack)
	}
	if st, _, err := get("http://" + addr + "/livez"); err != nil || st != 200 {
		t.Errorf("/livez during the flood: %d %v", st, err)
	}

	stop()
	wg.Wait()
	if st, _, err := get("http://" + addr + "/livez"); err != nil || st != 200 {
		t.Errorf("/livez after the flood: %d %v", st, err)
	}
}

// idleClient connects to addr, asks for /livez on a keep-alive connection and then sits on it
// until the worker closes it, and again, until ctx ends.
func idleClient(ctx context.Context, addr string, connected, answered *atomic.Int64) {
	d := net.Dialer{Timeout: 5 * time.Second}
	buf := make([]byte, 4096)
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		connected.Add(1)
		_, _ = io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: worker\r\n\r\n")
		gotAnswer := false
		for ctx.Err() == nil {
			_ = c.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
			n, err := c.Read(buf)
			if n > 0 && !gotAnswer {
				gotAnswer = true
				answered.Add(1)
			}
			if err != nil && !isTimeout(err) {
				break // closed by the worker
			}
		}
		c.Close()
		sleep(ctx, 200*time.Millisecond)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// everyProviderJobs makes n jobs over subscriptions of every provider pushsim simulates.
func (rg *rig) everyProviderJobs(n int) ([][]byte, []string) {
	rg.t.Helper()
	var subs []job.Subscription
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "generic"} {
		host := ""
		if p == "generic" {
			host = genericHost
		}
		for range 4 {
			s, err := rg.sim.Subscribe(p, host, rg.key)
			if err != nil {
				rg.t.Fatal(err)
			}
			subs = append(subs, s)
		}
	}
	lines := make([][]byte, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("job-%05d", i)
		lines[i] = rg.job(ids[i], subs[i%len(subs)])
	}
	return lines, ids
}
