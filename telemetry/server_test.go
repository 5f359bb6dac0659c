package telemetry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a Server on 127.0.0.1:0, serving until the test ends, and a client for it.
type testServer struct {
	t      *testing.T
	s      *Server
	client *http.Client
	base   string
}

func startServer(t *testing.T, o ServerOptions) *testServer {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	tr := &http.Transport{}
	ts := &testServer{t: t, s: s, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}, base: "http://" + s.Addr()}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ts
}

// get fetches path with the given Accept header ("" for none) and returns status, content type
// and body.
func (ts *testServer) get(path, accept string) (int, string, string) {
	ts.t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.base+path, nil)
	if err != nil {
		ts.t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// expect checks path's status and that its body contains every want.
func (ts *testServer) expect(path string, status int, wants ...string) string {
	ts.t.Helper()
	code, _, body := ts.get(path, "")
	if code != status {
		ts.t.Errorf("GET %s: %d, want %d; body:\n%s", path, code, status, body)
	}
	for _, w := range wants {
		if !strings.Contains(body, w) {
			ts.t.Errorf("GET %s: body lacks %q:\n%s", path, w, body)
		}
	}
	return body
}

func TestServerMetricsTextAndOpenMetrics(t *testing.T) {
	reg, m := newTestMetrics(t)
	populate(m)
	ts := startServer(t, ServerOptions{Gatherer: reg, Health: NewHealth(nil)})

	code, ctype, text := ts.get(MetricsPath, "")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("GET /metrics: %d %q", code, ctype)
	}
	for _, want := range []string{
		`webpush_sends_total{class="transactional",code="ACCEPTED",provider="fcm"} 1`,
		`webpush_queue_lag_entries{class="transactional",shard="0",stream="lane:fcm"} 2`,
		`webpush_queue_lag_entries{class="",shard="0",stream="intake"} 3`,
		"go_goroutines ", "process_cpu_seconds_total ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text scrape lacks %q", want)
		}
	}
	metricstest.CheckMetrics(t, []byte(text))

	code, ctype, om := ts.get(MetricsPath, "application/openmetrics-text;version=1.0.0")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "application/openmetrics-text") {
		t.Fatalf("GET /metrics as OpenMetrics: %d %q", code, ctype)
	}
	if !strings.HasSuffix(om, "# EOF\n") {
		t.Error("OpenMetrics scrape does not end with # EOF")
	}
	var exemplar bool
	for _, line := range strings.Split(om, "\n") {
		if strings.HasPrefix(line, `webpush_send_duration_seconds_bucket{provider="fcm",le="0.25"}`) && strings.Contains(line, `# {job_id="job-1"} 0.12`) {
			exemplar = true
		}
	}
	if !exemplar {
		t.Errorf("OpenMetrics scrape shows no exemplar job_id=job-1 on the 0.25 bucket:\n%s", grep(om, "webpush_send_duration_seconds_bucket"))
	}
}

// TestScrapeSurvivesABadSource: a source that repeats a provider costs that series, logged,
// not the whole scrape.
func TestScrapeSurvivesABadSource(t *testing.T) {
	reg, m := newTestMetrics(t)
	m.SetProviderSource(func() []ProviderGauge {
		return []ProviderGauge{{Provider: "fcm", InFlight: 1}, {Provider: "fcm", InFlight: 2}}
	})
	var logs proctest.Buffer
	ts := startServer(t, ServerOptions{Gatherer: reg, Health: NewHealth(nil), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	code, _, text := ts.get(MetricsPath, "")
	if code != http.StatusOK || !strings.Contains(text, "webpush_sends_total") {
		t.Fatalf("GET /metrics: %d, sends_total missing: %v", code, !strings.Contains(text, "webpush_sends_total"))
	}
	if out := logs.String(); !strings.Contains(out, "was collected before with the same name and label values") {
		t.Errorf("the duplicate series was not logged:\n%s", out)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestLivez(t *testing.T) {
	c := timetest.NewClock(t0)
	h := NewHealth(c.Now)
	ts := startServer(t, ServerOptions{Gatherer: NewRegistry(), Health: h})
	ts.expect(LivezPath, http.StatusOK, "ok")

	intake := h.Loop("intake", 10*time.Second)
	promoter := h.Loop("promoter", 30*time.Second)
	ts.expect(LivezPath, http.StatusOK, "ok")

	c.Add(8 * time.Second)
	intake.Tick()
	c.Add(8 * time.Second) // intake ticked 8s ago, promoter registered 16s ago: both within
	ts.expect(LivezPath, http.StatusOK, "ok")

	c.Add(4 * time.Second) // intake 12s > 10s
	promoter.Tick()
	body := ts.expect(LivezPath, http.StatusServiceUnavailable, "intake", "no tick for 12s (bound 10s)")
	if strings.Contains(body, "promoter") {
		t.Errorf("/livez names the promoter, which ticks:\n%s", body)
	}
	ts.expect(LivezPath+"?verbose", http.StatusServiceUnavailable,
		"[-]loop intake failed: no tick for 12s (bound 10s)\n", "[+]loop promoter ok\n", "livez check failed\n")

	intake.Done() // the loop ended on purpose: no longer watched
	ts.expect(LivezPath, http.StatusOK, "ok")
	ts.expect(LivezPath+"?verbose", http.StatusOK, "[+]loop promoter ok\nlivez check passed\n")
	intake.Tick() // a tick after Done does not register it again
	c.Add(time.Minute)
	promoter.Done()
	ts.expect(LivezPath, http.StatusOK, "ok")
}

func TestReadyz(t *testing.T) {
	c := timetest.NewClock(t0)
	h := NewHealth(c.Now)
	ts := startServer(t, ServerOptions{Gatherer: NewRegistry(), Health: h})

	h.SetReady("registry", false, "not loaded yet")
	h.SetReady("groups", false, "")
	h.SetRedisFreshness(10 * time.Second)
	ts.expect(ReadyzPath, http.StatusServiceUnavailable,
		"registry: not loaded yet", "groups: not ok", "redis: no check has succeeded yet")

	h.SetReady("registry", true, "")
	h.SetReady("groups", true, "")
	ts.expect(ReadyzPath+"?verbose", http.StatusServiceUnavailable,
		"[+]registry ok\n[+]groups ok\n[-]redis failed: no check has succeeded yet\nreadyz check failed\n")

	h.RedisChecked(c.Now(), nil)
	ts.expect(ReadyzPath, http.StatusOK, "ok")
	ts.expect(ReadyzPath+"?verbose", http.StatusOK, "[+]registry ok\n[+]groups ok\n[+]redis ok\nreadyz check passed\n")

	// Freshness: the last success ages past the bound; a failed check keeps it failing.
	c.Add(10 * time.Second)
	ts.expect(ReadyzPath, http.StatusOK, "ok")
	c.Add(time.Second)
	ts.expect(ReadyzPath, http.StatusServiceUnavailable, "redis: last success 11s ago (bound 10s)")
	h.RedisChecked(c.Now(), errors.New("dial tcp 127.0.0.1:6379: connection\nrefused"))
	ts.expect(ReadyzPath, http.StatusServiceUnavailable, "the last check failed: dial tcp 127.0.0.1:6379: connection refused")
	h.RedisChecked(c.Now(), nil)
	ts.expect(ReadyzPath, http.StatusOK, "ok")

	h.Draining()
	ts.expect(ReadyzPath, http.StatusServiceUnavailable, "draining: shutting down")
	h.SetReady(DrainingCheck, true, "")
	h.RedisChecked(c.Now(), nil)
	ts.expect(ReadyzPath+"?verbose", http.StatusServiceUnavailable, "[-]draining failed: shutting down\nreadyz check failed\n")

	// /readyz never depends on liveness.
	h.Loop("intake", time.Second)
	c.Add(time.Hour)
	ts.expect(LivezPath, http.StatusServiceUnavailable, "intake")
}

// TestRedisCheckBeforeFreshness: RedisChecked alone adds the check with the default bound; a
// first failure is reported with its error.
func TestRedisCheckBeforeFreshness(t *testing.T) {
	c := timetest.NewClock(t0)
	h := NewHealth(c.Now)
	if s := h.readiness(); len(s) != 0 {
		t.Fatalf("checks before any was set: %v", s)
	}
	h.RedisChecked(c.Now(), errors.New("NOAUTH Authentication required"))
	s := h.readiness()
	if len(s) != 1 || s[0].ok || !strings.Contains(s[0].reason, "NOAUTH") {
		t.Fatalf("after a failed first check: %+v", s)
	}
	h.RedisChecked(c.Now(), nil)
	c.Add(DefaultRedisFreshness)
	if s := h.readiness(); !s[0].ok {
		t.Fatalf("at the default bound: %+v", s)
	}
	c.Add(time.Millisecond)
	if s := h.readiness(); s[0].ok {
		t.Fatalf("past the default bound: %+v", s)
	}
	// An older result arriving late does not move the last success back.
	h.RedisChecked(c.Now(), nil)
	h.RedisChecked(c.Now().Add(-time.Hour), nil)
	if s := h.readiness(); !s[0].ok {
		t.Fatalf("after a late old success: %+v", s)
	}
}

func TestNilHealthAndBeat(t *testing.T) {
	var h *Health
	b := h.Loop("x", time.Second)
	b.Tick()
	b.Done()
	h.SetReady("registry", false, "no")
	h.RedisChecked(time.Now(), nil)
	h.SetRedisFreshness(time.Second)
	h.Draining()
	if h.readiness() != nil || h.loops() != nil {
		t.Error("a nil Health reports checks or loops")
	}
}

func TestLoopNonPositiveBoundPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"intake"`) {
			t.Errorf("recovered %v, want a panic naming the loop", r)
		}
	}()
	NewHealth(nil).Loop("intake", 0)
}

func TestPprof(t *testing.T) {
	off := startServer(t, ServerOptions{Gatherer: NewRegistry(), Health: NewHealth(nil)})
	for _, p := range []string{PprofPath, PprofPath + "cmdline", PprofPath + "heap"} {
		off.expect(p, http.StatusNotFound)
	}
	on := startServer(t, ServerOptions{Gatherer: NewRegistry(), Health: NewHealth(nil), Pprof: true})
	on.expect(PprofPath, http.StatusOK, "goroutine")
	// The command line is not served: it holds --redis's password.
	on.expect(PprofPath+"cmdline", http.StatusNotFound)
	on.expect(PprofPath+"heap?debug=1", http.StatusOK, "heap profile")
}

func TestServerMethodsAndUnknownPaths(t *testing.T) {
	ts := startServer(t, ServerOptions{Gatherer: NewRegistry(), Health: NewHealth(nil)})
	ts.expect("/", http.StatusNotFound)
	resp, err := ts.client.Post(ts.base+ReadyzPath, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %d, want 405", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodHead, ts.base+LivezPath, nil)
	resp, err = ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /livez: %d, want 200", resp.StatusCode)
	}
}

// TestShutdown: Serve returns nil after Shutdown; Shutdown without Serve frees the address.
func TestShutdown(t *testing.T) {
	s, err := NewServer(ServerOptions{Addr: "127.0.0.1:0", Gatherer: NewRegistry(), Health: NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	// A request proves Serve is running before Shutdown.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + s.Addr() + LivezPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}

	never, err := NewServer(ServerOptions{Addr: "127.0.0.1:0", Gatherer: NewRegistry(), Health: NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	addr := never.Addr()
	if err := never.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address of a Server shut down before Serve is still held: %v", err)
	}
	ln.Close()
}

func TestNewServerErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		name string
		o    ServerOptions
		want string
	}{
		{"busy address", ServerOptions{Addr: busy.Addr().String(), Gatherer: NewRegistry(), Health: NewHealth(nil)}, `"` + busy.Addr().String() + `"`},
		{"bad address", ServerOptions{Addr: "127.0.0.1:notaport", Gatherer: NewRegistry(), Health: NewHealth(nil)}, `"127.0.0.1:notaport"`},
		{"no gatherer", ServerOptions{Addr: "127.0.0.1:0", Health: NewHealth(nil)}, "Gatherer is nil"},
		{"no health", ServerOptions{Addr: "127.0.0.1:0", Gatherer: NewRegistry()}, "Health is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewServer(c.o)
			if err == nil {
				_ = s.Shutdown(context.Background())
				t.Fatal("NewServer succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestServerOff(t *testing.T) {
	s, err := NewServer(ServerOptions{Addr: ""})
	if s != nil || err != nil {
		t.Fatalf("NewServer with no address: %v, %v; want nil, nil", s, err)
	}
	if s.Addr() != "" || s.Serve() != nil || s.Shutdown(context.Background()) != nil {
		t.Error("a nil Server is not inert")
	}
}
