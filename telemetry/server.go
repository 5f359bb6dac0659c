package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is the listener's address unless run's --http says otherwise.
const DefaultAddr = ":9090"

// The listener's paths.
const (
	MetricsPath = "/metrics"
	LivezPath   = "/livez"
	ReadyzPath  = "/readyz"
	PprofPath   = "/debug/pprof/"
)

// The listener's limits. The write timeout leaves room for a 60-second CPU profile
// (/debug/pprof/profile?seconds=60 is refused when the server's write timeout is shorter). A
// keep-alive connection is closed after idleTimeout without a request: Prometheus scrapes every
// 15 s or more and reconnects at no cost worth keeping a descriptor for, and a connection held
// open by no one in particular is one the worker's Redis and push connections cannot have (see
// ListenerConns for the cap on how many there are at once).
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 65 * time.Second
	idleTimeout       = 5 * time.Second
	maxHeaderBytes    = 16 << 10
	scrapeTimeout     = 10 * time.Second
	scrapesInFlight   = 4
)

// ServerOptions configures NewServer.
type ServerOptions struct {
	// Addr is the address to listen on: "" is no listener, ":0" picks a free port.
	Addr string
	// Gatherer is what /metrics serves, normally the registry of NewRegistry. Required.
	Gatherer prometheus.Gatherer
	// Health is what /livez and /readyz serve. Required.
	Health *Health
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// Logger gets the listener's own errors. Nil: slog.Default().
	Logger *slog.Logger
	// MaxConns is how many connections the listener holds at once; 0: ListenerConns of the
	// process's descriptor limit.
	MaxConns int
}

// Server is the worker's HTTP listener: /metrics (Prometheus text, or OpenMetrics with
// exemplars when the scraper asks for it), /livez, /readyz and, with Pprof, /debug/pprof/.
// A nil *Server (NewServer with Addr "") is valid: Addr is "", Serve and Shutdown return nil
// at once.
type Server struct {
	srv *http.Server     // immutable after NewServer
	ln  *boundedListener // immutable after NewServer
}

// NewServer binds o.Addr at once, so that a bad or busy address fails at start with an error
// naming it, and returns the Server ready to Serve. With o.Addr "" it returns nil, nil.
func NewServer(o ServerOptions) (*Server, error) {
	if o.Addr == "" {
		return nil, nil
	}
	if o.Gatherer == nil {
		return nil, errors.New("telemetry: NewServer: ServerOptions.Gatherer is nil")
	}
	if o.Health == nil {
		return nil, errors.New("telemetry: NewServer: ServerOptions.Health is nil")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	maxConns := o.MaxConns
	if maxConns <= 0 {
		nofile := fileLimit()
		maxConns = ListenerConns(nofile)
		log.Info("http listener limits", "component", "http", "max_conns", maxConns, "nofile", nofile,
			"reserved", max(int64(nofile)-int64(maxConns), 0), "idle_timeout", idleTimeout.String())
	}
	tcp, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("telemetry: HTTP listener on %q: %w", o.Addr, err)
	}
	ln := newBoundedListener(tcp, maxConns)
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		EnableOpenMetrics:   true,
		ErrorLog:            promLogger{log},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: scrapesInFlight,
		Timeout:             scrapeTimeout,
	}))
	mux.HandleFunc("GET "+LivezPath, livez(o.Health))
	mux.HandleFunc("GET "+ReadyzPath, readyz(o.Health))
	// Not pprof's cmdline: the command line holds --redis's password and may hold a
	// --vapid-key given inline.
	if o.Pprof {
		mux.HandleFunc(PprofPath, pprof.Index)
		mux.HandleFunc(PprofPath+"profile", pprof.Profile)
		mux.HandleFunc(PprofPath+"symbol", pprof.Symbol)
		mux.HandleFunc(PprofPath+"trace", pprof.Trace)
	}
	return &Server{
		ln: ln,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: readHeaderTimeout,
			ReadTimeout:       readTimeout,
			WriteTimeout:      writeTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ConnState:         ln.connState,
			ErrorLog:          slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelWarn),
		},
	}, nil
}

// Addr is the address the listener is bound to (the port ":0" picked).
func (s *Server) Addr() string {
	if s == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Serve serves until Shutdown, then returns nil; any other end is an error.
func (s *Server) Serve() error {
	if s == nil {
		return nil
	}
	if err := s.srv.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("telemetry: HTTP listener on %s: %w", s.Addr(), err)
	}
	return nil
}

// Shutdown stops accepting connections and waits, within ctx, for the requests in progress.
// It closes the listener also when Serve was never called.
func (s *Server) Shutdown(ctx context.Context) error {
	if s == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if cerr := s.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
		err = cerr
	}
	return err
}

// livez is 200 "ok" while every registered loop ticks within its bound, else 503 naming the
// loops that do not. ?verbose lists every loop.
func livez(h *Health) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		loops := h.loops()
		items := make([]checkState, len(loops))
		for i, l := range loops {
			items[i] = checkState{name: "loop " + l.name, ok: l.ok}
			if !l.ok {
				items[i].reason = fmt.Sprintf("no tick for %s (bound %s)", l.since.Round(time.Millisecond), l.within)
			}
		}
		report(w, r, "livez", items)
	}
}

// readyz is 200 "ok" while every readiness check is ok, else 503 with each failing check and
// its reason. ?verbose lists every check.
func readyz(h *Health) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		report(w, r, "readyz", h.readiness())
	}
}

// report answers a health endpoint: 200 "ok" when every item is ok, else 503 and the failing
// items with their reasons on one line. With ?verbose the body lists every item, in the shape
// of Kubernetes' own /readyz?verbose.
func report(w http.ResponseWriter, r *http.Request, what string, items []checkState) {
	var lines, failed []string
	for _, c := range items {
		if c.ok {
			lines = append(lines, "[+]"+c.name+" ok")
			continue
		}
		reason := oneLine(c.reason)
		lines = append(lines, "[-]"+c.name+" failed: "+reason)
		failed = append(failed, c.name+": "+reason)
	}
	ok := len(failed) == 0
	var body string
	switch {
	case r.URL.Query().Has("verbose") && ok:
		body = strings.Join(append(lines, what+" check passed"), "\n") + "\n"
	case r.URL.Query().Has("verbose"):
		body = strings.Join(append(lines, what+" check failed"), "\n") + "\n"
	case ok:
		body = "ok\n"
	default:
		body = what + " failed: " + strings.Join(failed, "; ") + "\n"
	}
	respond(w, ok, body)
}

func respond(w http.ResponseWriter, ok bool, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(body))
}

// promLogger passes promhttp's errors (a failed collection, a failed write) to slog.
type promLogger struct{ l *slog.Logger }

func (p promLogger) Println(v ...any) {
	p.l.Warn("telemetry: serving "+MetricsPath+": "+strings.TrimSpace(fmt.Sprintln(v...)), "component", "http")
}
