package dispatch

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/registrytest"
	jobfmt "github.com/webpush-gateway/webpush-gateway/job"
)

// testRegistry is the registry of the limits tests: every provider generous and quick to
// notice trouble (2 s breaker window, 1 s cooldown, 1 s host cooldown, heartbeats every
// 200 ms), so that what a test measures is the one limit it sets. extra holds YAML lines added
// to a provider's entry, by id; extra["host_breaker"], when set, is the host breaker's lines
// instead of those.
func testRegistry(extra map[string]string) string {
	hostBreaker := "  failures: 3\n  cooldown: 1s\n"
	if hb := extra["host_breaker"]; hb != "" {
		hostBreaker = ""
		for _, line := range strings.Split(strings.TrimSpace(hb), "\n") {
			hostBreaker += "  " + line + "\n"
		}
	}
	var b strings.Builder
	b.WriteString(`version: 1
defaults:
  rate: 1000
  burst: 100
  max_in_flight: 16
  timeout: 2s
  connect_timeout: 1s
  tls_timeout: 1s
  response_header_timeout: 1500ms
` + registrytest.QuickBreaker + `heartbeat:
  every: 200ms
  stale_after: 1s
host_breaker:
` + hostBreaker + `providers:
`)
	for _, p := range []struct{ id, lines string }{
		{"fcm", "hosts: [fcm.googleapis.com]"},
		{"autopush", "hosts: [updates.push.services.mozilla.com, push.services.mozilla.com]"},
		{"apple", "hosts: [web.push.apple.com]"},
		{"wns", "hosts: [notify.windows.com]"},
		{"fallback", "kind: generic"},
	} {
		fmt.Fprintf(&b, "  - id: %s\n    %s\n", p.id, p.lines)
		for _, line := range strings.Split(strings.TrimSpace(extra[p.id]), "\n") {
			if line != "" {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
	}
	return b.String()
}

// feed enqueues jobs to sub at a steady perSecond, with ids prefix-0, prefix-1, ..., until the
// returned stop is called; stop returns the ids enqueued. It enqueues what is due by the
// elapsed time on every tick, so a late tick catches up instead of lowering the rate.
func (e *env) feed(prefix string, sub jobfmt.Subscription, perSecond float64) (stop func() []string) {
	done := make(chan struct{})
	exited := make(chan struct{})
	var ids []string // owned by the feeding goroutine until exited is closed
	go func() {
		defer close(exited)
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			due := int(time.Since(start).Seconds() * perSecond)
			var jobs [][]byte
			for len(ids) < due {
				id := fmt.Sprintf("%s-%d", prefix, len(ids))
				ids = append(ids, id)
				jobs = append(jobs, job(id, sub, "fed "+id))
			}
			if len(jobs) > 0 {
				if _, err := e.prod.Enqueue(context.Background(), jobs...); err != nil {
					e.t.Errorf("feed %s: %v", prefix, err)
					return
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() []string {
		once.Do(func() { close(done); <-exited })
		return ids
	}
	e.t.Cleanup(func() { stop() })
	return stop
}

// waitAccepted waits until every id has a ledger record, and fails unless each has exactly one
// and it is ACCEPTED.
func (e *env) waitAccepted(ids []string) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("ledger records of %d jobs", len(ids)), func() bool {
		got := e.byID("results")
		for _, id := range ids {
			if len(got[id]) == 0 {
				return false
			}
		}
		return true
	})
	got := e.byID("results")
	for _, id := range ids {
		if rs := got[id]; len(rs) != 1 || rs[0]["code"] != "ACCEPTED" {
			e.t.Errorf("%s: ledger records %v, want one ACCEPTED", id, rs)
		}
	}
}

// holds fails the test unless cond stays true for d: how a test shows that something does not
// happen (a lane that must not read). It polls; it is not a wait for an outcome.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(10 * time.Millisecond) // sampling a condition that must stay true
	}
}

// sentAt are the arrival times at pushsim of the requests to provider (pushsim's name), sorted.
func (e *env) sentAt(provider string) []time.Time {
	var out []time.Time
	for _, d := range e.sim.Deliveries() {
		if d.Provider == provider {
			out = append(out, d.At)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// countIn counts the times in [from, to).
func countIn(ts []time.Time, from, to time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// maxOverlap is the most requests in flight at once among requests that arrived at ats and
// were each answered after hold (pushsim's Slow fault): a request that arrived before an
// earlier one's answer overlapped it.
func maxOverlap(ats []time.Time, hold time.Duration) int {
	sorted := append([]time.Time(nil), ats...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Before(sorted[j]) })
	most := 0
	for i, t := range sorted {
		n := 1
		for _, u := range sorted[:i] {
			if t.Before(u.Add(hold)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// blackHole is a TCP listener that accepts connections and never says a word: a self-hosted
// push server that hangs. It counts the connections it took.
type blackHole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn // guarded by mu
	done  chan struct{}
}

func newBlackHole(t *testing.T) *blackHole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackHole{ln: ln, done: make(chan struct{})}
	go func() { // owned by the test: Cleanup closes the listener and waits for it
		defer close(b.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-b.done
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, c := range b.conns {
			c.Close()
		}
	})
	return b
}

func (b *blackHole) addr() string { return b.ln.Addr().String() }

func (b *blackHole) accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

// laneEntry writes a lane entry as intake or the promoter would: job, provider, attempt,
// enqueued now.
func (e *env) laneEntry(provider string, attempt int, raw []byte) {
	e.t.Helper()
	e.xadd(e.store.Keys(0).Lane(provider), "job", string(raw), "provider", provider,
		"attempt", fmt.Sprint(attempt), "enqueued_at", fmt.Sprint(e.clock.Now().UnixMilli()))
}
