// Package pushsim simulates the Web Push services the gateway delivers to: Google FCM, Mozilla
// Autopush, Apple Web Push, Microsoft WNS, and a generic RFC 8030 service for every other host.
// It serves them all on one TLS listener (HTTP/2 and HTTP/1.1) with a certificate issued on the
// fly for whatever name the client asks for, so the gateway reaches it under the real provider
// host names through a connect-to override and an extra CA file: routing, TLS and HTTP/2 are
// exercised on real authorities.
//
// Each push is checked the way the real service checks it (VAPID JWT signature, key, audience
// and expiry, TTL, Urgency, Topic, Content-Encoding, size), decrypted with the subscription's
// keys, recorded as a Delivery, and answered with the provider's recorded shape from
// test/fixtures: the same answers the classifier is tested on. Apple's service also reads a
// decrypted payload the way Safari does and refuses a broken declarative push message; an
// Autopush subscription can be routed through a simulated FCM bridge (Bridge), with the
// bridge's own answers. Faults (stall, fail, throttle, reset, slow, echo) are injected per
// provider, through the Go API or the admin HTTP API.
//
// pushsim verifies JWTs with its own code and never imports vapid or adapter: a simulator that
// shares the sender's code proves nothing.
package pushsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures Start. The zero value is a working simulator on loopback.
type Config struct {
	// Addr is the TLS listener for push requests; "" means 127.0.0.1:0.
	Addr string
	// AdminAddr is the plain-HTTP admin API; "" means 127.0.0.1:0. The admin API has no
	// authentication: keep it on loopback.
	AdminAddr string
	// Dir receives ca.pem, the CA certificate clients must trust; "" means a temporary directory
	// removed by Close.
	Dir string
	// Now is the clock for JWT expiry checks and Delivery.At; nil means time.Now. Certificates
	// always use the real clock, since clients verify them against theirs.
	Now func() time.Time
	// Seed seeds the source that decides which requests a fault's Ratio hits, so a test sees the
	// same sequence on every run.
	Seed uint64
	// MaxDeliveries bounds the deliveries kept in memory, oldest dropped first; 0 means
	// DefaultMaxDeliveries.
	MaxDeliveries int
	// Sample, when above 1, checks only one push in Sample in full: the others skip the JWT
	// signature check (a token verified before is still taken from the cache) and the
	// decryption of the body, and keep every other check (subscription, key match, aud, exp,
	// headers, size). It is for load runs, where an ECDSA verify and a decryption per push would
	// make the simulator the busiest process on the machine. 0 or 1 checks every push.
	Sample int
	// Lean keeps no request headers, body or plaintext in the recorded deliveries: a load run
	// needs only when and how each push was answered.
	Lean bool
	// ErrorLog receives the HTTP servers' own errors (TLS handshakes that failed, ...); nil
	// discards them.
	ErrorLog *log.Logger
}

// Server is a running simulator. Its methods are safe for concurrent use.
type Server struct {
	now      func() time.Time // immutable after Start
	ca       *authority       // immutable after Start
	caFile   string           // immutable after Start
	dir      string           // immutable after Start
	ownDir   bool             // immutable after Start: Close removes dir
	ln       net.Listener     // immutable after Start
	adminLn  net.Listener     // immutable after Start
	srv      *http.Server     // immutable after Start
	admin    *http.Server     // immutable after Start
	subs     *subscriptionStore
	log      *deliveryLog
	faults   *faultTable
	verified verifiedCache
	sample   uint64        // immutable after Start; Config.Sample, at least 1
	lean     bool          // immutable after Start
	pushes   atomic.Uint64 // pushes seen, for sampling
	wire     *countingListener
	ids      atomic.Uint64 // message ids in success answers
	inFlight atomic.Int64

	closing   chan struct{} // closed by Close: stalled and slow handlers give up
	closeOnce sync.Once
	closeErr  error
	serveWG   sync.WaitGroup // the two Serve goroutines, owned by Start, waited for by Close

	gate     sync.Mutex
	closed   bool           // guarded by gate
	handlers sync.WaitGroup // push handlers in flight; Add only under gate while !closed
}

// Start creates the CA, writes ca.pem, and starts serving push requests and the admin API.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.AdminAddr == "" {
		cfg.AdminAddr = "127.0.0.1:0"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxDeliveries <= 0 {
		cfg.MaxDeliveries = DefaultMaxDeliveries
	}
	if cfg.ErrorLog == nil {
		cfg.ErrorLog = log.New(io.Discard, "", 0)
	}
	ca, err := newAuthority()
	if err != nil {
		return nil, err
	}
	s := &Server{
		now:     cfg.Now,
		ca:      ca,
		dir:     cfg.Dir,
		subs:    newSubscriptionStore(),
		log:     newDeliveryLog(cfg.MaxDeliveries),
		faults:  newFaultTable(cfg.Seed),
		closing: make(chan struct{}),
		sample:  uint64(max(1, cfg.Sample)),
		lean:    cfg.Lean,
	}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "pushsim-"); err != nil {
			return nil, fmt.Errorf("pushsim: temp dir: %w", err)
		}
		s.ownDir = true
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("pushsim: CA dir: %w", err)
	}
	s.caFile = filepath.Join(s.dir, "ca.pem")
	if err := ca.writePEM(s.caFile); err != nil {
		s.removeDir()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		s.removeDir()
		return nil, fmt.Errorf("pushsim: listen: %w", err)
	}
	s.wire = &countingListener{Listener: ln}
	s.ln = s.wire
	if s.adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
		s.ln.Close()
		s.removeDir()
		return nil, fmt.Errorf("pushsim: admin listen: %w", err)
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	s.srv = &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{GetCertificate: ca.getCertificate, MinVersion: tls.VersionTLS12},
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          cfg.ErrorLog,
	}
	s.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: cfg.ErrorLog}
	s.serveWG.Add(2)
	go func() {
		defer s.serveWG.Done()
		_ = s.srv.ServeTLS(s.ln, "", "") // ErrServerClosed after Close
	}()
	go func() {
		defer s.serveWG.Done()
		_ = s.admin.Serve(s.adminLn)
	}()
	return s, nil
}

// Close stops both listeners, drops every connection, waits for every handler (stalled ones
// included) and the serve goroutines to return, and removes the temporary CA directory. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.gate.Lock()
		s.closed = true
		s.gate.Unlock()
		close(s.closing)
		err := errors.Join(s.srv.Close(), s.admin.Close())
		s.handlers.Wait()
		s.serveWG.Wait()
		s.removeDir()
		s.closeErr = err
	})
	return s.closeErr
}

func (s *Server) removeDir() {
	if s.ownDir {
		_ = os.RemoveAll(s.dir)
	}
}

// Addr is the push listener's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// CAFile is the path of the PEM CA certificate clients must trust.
func (s *Server) CAFile() string { return s.caFile }

// CertPool returns a pool holding pushsim's CA, for in-process clients.
func (s *Server) CertPool() *x509.CertPool { return s.ca.pool.Clone() }

// CAPEM returns the CA certificate in PEM form.
func (s *Server) CAPEM() []byte { return append([]byte(nil), s.ca.certPEM...) }

// AdminURL is the admin API's base URL, "http://127.0.0.1:PORT".
func (s *Server) AdminURL() string { return "http://" + s.adminLn.Addr().String() }

// ConnectTo returns a connect-to override ("fcm.googleapis.com:443=127.0.0.1:PORT", as curl's
// --connect-to) for each of the four provider hosts. Generic hosts cannot be listed in advance:
// callers add their own.
func (s *Server) ConnectTo() []string {
	addr := s.Addr()
	// A listener on every interface is reached on loopback.
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	out := make([]string, 0, len(providerHosts))
	for _, h := range providerHosts {
		out = append(out, h+":443="+addr)
	}
	return out
}

// enter admits a push handler unless Close has begun; exit must follow.
func (s *Server) enter() bool {
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	s.inFlight.Add(1)
	return true
}

func (s *Server) exit() {
	s.inFlight.Add(-1)
	s.handlers.Done()
}

// ServeHTTP answers one push request: an injected fault, or the provider's checks.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.exit()
	now := s.now()
	provider := providerFor(r.Host)
	d := Delivery{
		Provider: provider,
		Host:     canonicalHost(r.Host),
		Endpoint: "https://" + r.Host + r.RequestURI,
		Header:   s.headerCopy(r.Header),
		JobID:    r.Header.Get("X-Job-Id"),
		At:       now,
		Proto:    r.Proto,
	}
	_, sender, _ := parseVapidHeader(r.Header.Get("Authorization"))
	if f, hit := s.faults.draw(provider, d.Host, sender); hit {
		d.Fault = f.Kind.String()
		switch f.Kind {
		case Stall:
			s.stall(r, d)
			return
		case Reset:
			s.reset(w, r, d)
			return
		case Fail, Throttle:
			s.respond(w, faultAnswer(provider, f), d)
			return
		case Echo:
			s.respond(w, echoAnswer(provider, f, r.RequestURI), d)
			return
		case Slow:
			if !s.sleep(r.Context(), f.Delay) {
				s.respond(w, noAnswer, d)
				return
			}
		}
	}
	a := s.push(r, provider, now, &d)
	s.respond(w, a, d)
}

// sampled reports whether this push is one Config.Sample checks in full.
func (s *Server) sampled() bool {
	return s.sample <= 1 || s.pushes.Add(1)%s.sample == 1
}

func (s *Server) headerCopy(h http.Header) http.Header {
	if s.lean {
		return nil
	}
	return h.Clone()
}

// noAnswer records a request that got no HTTP answer.
var noAnswer = answer{code: "TRANSPORT_ERROR"}

// respond records d with a's outcome, then writes a. The record comes first so that a client
// that has read the answer always finds its delivery.
func (s *Server) respond(w http.ResponseWriter, a answer, d Delivery) {
	s.record(d, a)
	if a.status == 0 {
		panic(http.ErrAbortHandler) // no answer: the server resets the stream or closes the connection
	}
	h := w.Header()
	for k, v := range a.header {
		h[k] = append([]string(nil), v...)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

func (s *Server) record(d Delivery, a answer) {
	d.Status, d.Code, d.Answer = a.status, a.code, a.name
	s.log.add(d)
}

// stall holds the request until its client leaves or the server closes, then records it.
func (s *Server) stall(r *http.Request, d Delivery) {
	// Reading the body to its end lets HTTP/1.1 notice the client leaving (its background read
	// starts only then); HTTP/2 sees RST_STREAM either way.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
	s.respond(nil, noAnswer, d)
}

// reset records the request and drops it without an answer: on HTTP/1.1 by closing the TCP
// connection with SO_LINGER 0 (the client reads a reset), on HTTP/2 by resetting the stream.
func (s *Server) reset(w http.ResponseWriter, r *http.Request, d Delivery) {
	if r.ProtoMajor == 1 {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				s.record(d, noAnswer)
				abortConn(conn)
				return
			}
		}
	}
	s.respond(w, noAnswer, d)
}

func abortConn(conn net.Conn) {
	raw := conn
	if tc, ok := conn.(*tls.Conn); ok {
		raw = tc.NetConn() // close under TLS: no close_notify, the peer just loses the connection
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = raw.Close()
}

// sleep waits d, and reports false if the client left or the server closed first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-s.closing:
	}
	return false
}
