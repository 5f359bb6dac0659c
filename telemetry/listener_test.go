package telemetry

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// rawGet writes a keep-alive GET of path on c and reads its answer.
func rawGet(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: worker\r\n\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	return readAnswer(t, c)
}

func readAnswer(t *testing.T, c net.Conn) int {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The listener holds at most MaxConns connections. A new client is answered by closing an idle
// one: the one idle longest since an answer, else the one waiting longest for its first
// request. When every connection is serving a request, a new one waits until one is done.
func TestListenerHoldsAtMostMaxConns(t *testing.T) {
	const maxConns = 4
	gate := &gatedCollector{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(gate)
	ts := startServer(t, ServerOptions{Gatherer: reg, Health: NewHealth(nil), MaxConns: maxConns})
	addr := ts.s.Addr()

	silent := dial(t, addr) // connects and has sent nothing yet
	waitFor(t, func() bool { _, idle := ts.s.ln.counts(); return idle == 1 })
	var clients []net.Conn
	for i := range 3 * maxConns {
		c := dial(t, addr)
		if st := rawGet(t, c, LivezPath); st != http.StatusOK {
			t.Fatalf("client %d: /livez %d", i, st)
		}
		clients = append(clients, c)
		if n, _ := ts.s.ln.counts(); n > maxConns {
			t.Fatalf("after client %d: %d connections held, want at most %d", i, n, maxConns)
		}
	}
	if !stillOpen(silent) {
		t.Error("the connection that has sent nothing yet was closed while answered ones were idle")
	}
	// The most recent keep-alive clients are still served on their connections.
	if st := rawGet(t, clients[len(clients)-1], LivezPath); st != http.StatusOK {
		t.Errorf("the newest keep-alive client: /livez %d", st)
	}

	// Only connections that have sent nothing: the oldest makes room.
	for _, c := range append(clients, silent) {
		c.Close()
	}
	waitFor(t, func() bool { open, _ := ts.s.ln.counts(); return open == 0 })
	quiet := make([]net.Conn, maxConns)
	for i := range quiet {
		quiet[i] = dial(t, addr)
		waitFor(t, func() bool { open, _ := ts.s.ln.counts(); return open == i+1 })
	}
	beside := dial(t, addr)
	if st := rawGet(t, beside, LivezPath); st != http.StatusOK {
		t.Fatalf("a client beside %d silent connections: /livez %d", maxConns, st)
	}
	if stillOpen(quiet[0]) || !stillOpen(quiet[maxConns-1]) {
		t.Errorf("the oldest silent connection open: %v, the newest: %v; want closed and open", stillOpen(quiet[0]), stillOpen(quiet[maxConns-1]))
	}
	for _, c := range append(quiet, beside) {
		c.Close()
	}
	// Every connection serving a request: a new client waits until one is done. (First the
	// others leave, so that no busy client's arrival closes another still sending its request.)
	waitFor(t, func() bool { open, _ := ts.s.ln.counts(); return open == 0 })
	release := make(chan struct{})
	gate.block(release)
	busy := make([]net.Conn, maxConns)
	for i := range busy {
		busy[i] = dial(t, addr)
		if _, err := io.WriteString(busy[i], "GET "+MetricsPath+" HTTP/1.1\r\nHost: worker\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool {
		open, idle := ts.s.ln.counts()
		return open == maxConns && idle == 0 && gate.waiting() == maxConns
	})
	late := dial(t, addr)
	if _, err := io.WriteString(late, "GET "+LivezPath+" HTTP/1.1\r\nHost: worker\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = late.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := late.Read(make([]byte, 1)); n > 0 || err == nil {
		t.Fatal("a new client was answered while every connection was serving a request")
	}
	close(release)
	for i, c := range busy {
		if st := readAnswer(t, c); st != http.StatusOK {
			t.Fatalf("busy client %d: /metrics %d", i, st)
		}
	}
	if st := readAnswer(t, late); st != http.StatusOK {
		t.Fatalf("the late client, once a connection was free: /livez %d", st)
	}
}

// gatedCollector is a Collector whose Collect waits, while a gate is set, until the gate
// opens: a scrape that keeps its connection busy for as long as the test wants.
type gatedCollector struct {
	mu      sync.Mutex
	gate    chan struct{}
	blocked int
}

func (g *gatedCollector) block(release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = release
}

func (g *gatedCollector) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.blocked
}

func (g *gatedCollector) Describe(chan<- *prometheus.Desc) {}

func (g *gatedCollector) Collect(chan<- prometheus.Metric) {
	g.mu.Lock()
	gate := g.gate
	if gate != nil {
		g.blocked++
	}
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func TestListenerConnsFollowTheDescriptorLimit(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{{0, maxListenerConns}, {64, minListenerConns}, {1024, 64}, {4096, 256}, {20000, maxListenerConns}, {1 << 20, maxListenerConns}} {
		if got := ListenerConns(tc.nofile); got != tc.want {
			t.Errorf("ListenerConns(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

// stillOpen reports whether the peer has not closed c (a read times out rather than failing).
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond) // polling state another goroutine changes
	}
}
