package adapter

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// countingConn counts the writes, and the TLS records in them, that reach the socket.
type countingConn struct {
	net.Conn
	writes, records *atomic.Int64
	mu              sync.Mutex
	partial         []byte // a record header cut by a write
	skip            int    // record payload bytes still to pass over
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	c.mu.Lock()
	b := append(c.partial, p...)
	c.partial = nil
	for len(b) > 0 {
		if c.skip > 0 {
			n := min(c.skip, len(b))
			c.skip -= n
			b = b[n:]
			continue
		}
		if len(b) < 5 {
			c.partial = append([]byte(nil), b...)
			break
		}
		c.records.Add(1)
		c.skip = int(binary.BigEndian.Uint16(b[3:5]))
		b = b[5:]
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// countedTransport is a fallback transport whose every connection goes to addr and is
// counted.
func countedTransport(t *testing.T, addr string, cert *x509.Certificate) (*budgetedTransport, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	p := &providers.Provider{ID: providers.FallbackID, TLSTimeout: 2 * time.Second, ResponseHeaderTimeout: 5 * time.Second}
	return countedTransportWith(t, addr, cert, p, healthCheck{})
}

func countedTransportWith(t *testing.T, addr string, cert *x509.Certificate, p *providers.Provider, hc healthCheck) (*budgetedTransport, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var writes, records atomic.Int64
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, writes: &writes, records: &records}, nil
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	tr := newTransportWith(p, dial, roots, hc)
	t.Cleanup(tr.CloseIdleConnections)
	return tr, &writes, &records
}

// post sends one push-sized request on tr and checks it was answered 201 over HTTP/2.
func post(t *testing.T, tr http.RoundTripper, url string) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(make([]byte, 359)))
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("TTL", "60")
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("Authorization", "vapid t=eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.e30.c2lnbmF0dXJl, k=BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.ProtoMajor != 2 {
		t.Errorf("answer %d over %s, want 201 over HTTP/2", resp.StatusCode, resp.Proto)
	}
}

// TestLonePushIsOneWrite checks that a request sent alone goes out in one TLS record and one
// write (its HEADERS and DATA together), and that requests sent at the same moment share
// writes rather than each taking two.
func TestLonePushIsOneWrite(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr, writes, records := countedTransport(t, srv.Listener.Addr().String(), srv.Certificate())
	const url = "https://example.com/push/x"
	post(t, tr, url) // the handshake, the preface and SETTINGS, their acknowledgements
	time.Sleep(50 * time.Millisecond)

	// The HTTP/2 client now and then writes a frame of its own between requests (a stream
	// reset after an answer, a window update), one write each; two of those are allowed for.
	const n, control = 20, 2
	writes.Store(0)
	records.Store(0)
	for range n {
		post(t, tr, url)
	}
	if w, r := writes.Load(), records.Load(); w > n+control || r != w {
		t.Errorf("%d requests one after another took %d writes and %d TLS records, want at most %d writes of one record each", n, w, r, n+control)
	}

	const burst = 32
	writes.Store(0)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			<-start
			post(t, tr, url)
		})
	}
	close(start)
	wg.Wait()
	if w := writes.Load(); w > burst+control {
		t.Errorf("%d requests at once took %d writes, want at most %d", burst, w, burst+control)
	} else {
		t.Logf("%d requests at once took %d writes", burst, w)
	}
}

// TestClosedWindowIsNotWaitedFor checks that a request's header block is not held for its DATA
// when the server's flow-control window would make the DATA wait for the server: a server
// that opens a stream's window only once it has the stream's HEADERS is answered, not stalled
// until the request times out.
func TestClosedWindowIsNotWaitedFor(t *testing.T) {
	cert, addr := startWindowlessServer(t)
	tr, _, _ := countedTransport(t, addr, cert)
	for range 5 {
		start := time.Now()
		post(t, tr, "https://example.com/push/x")
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a request took %s: its HEADERS waited for DATA that waited for the window", d)
		}
	}
}

// TestSilentConnectionIsFoundByPing checks the health check of idle HTTP/2 connections: a
// server that stops answering, with its TCP connection still open, has that connection closed
// after a ping goes unanswered, long before the idle timeout, and the next push dials anew.
func TestSilentConnectionIsFoundByPing(t *testing.T) {
	cert, addr := startServer(t, true)
	p := &providers.Provider{ID: "fcm", TLSTimeout: 2 * time.Second, ResponseHeaderTimeout: 5 * time.Second}
	tr, _, _ := countedTransportWith(t, addr, cert, p, healthCheck{after: 100 * time.Millisecond, timeout: 100 * time.Millisecond})
	post(t, tr, "https://example.com/push/x") // the server goes silent on this connection after answering
	deadline := time.Now().Add(5 * time.Second)
	for tr.budget.Open() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open %s after the server went silent; the ping should have closed it", tr.budget.Open(), 5*time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
	post(t, tr, "https://example.com/push/x")
}

// startWindowlessServer is an HTTP/2 server written with the framer: it sets
// SETTINGS_INITIAL_WINDOW_SIZE to 0, opens each stream's window when its HEADERS arrive, and
// answers 201 once the stream's DATA has ended it.
func startWindowlessServer(t *testing.T) (*x509.Certificate, string) {
	t.Helper()
	return startServer(t, false)
}

// startServer is startWindowlessServer, whose connections, when silent is set, neither read
// nor write again once they have answered one request.
func startServer(t *testing.T, silent bool) (*x509.Certificate, string) {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS() // for its certificate and listener configuration; the handler is not used
	cert := srv.Certificate()
	tlsCert := srv.TLS.Certificates[0]
	srv.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{tlsCert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(stop); _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveWindowless(c, silent, stop)
		}
	}()
	return cert, ln.Addr().String()
}

func serveWindowless(c net.Conn, silent bool, stop <-chan struct{}) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		return
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			_ = fr.WriteWindowUpdate(f.StreamID, 1<<20)
		case *http2.DataFrame:
			if f.StreamEnded() {
				hbuf.Reset()
				_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: "201"})
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
				if silent {
					<-stop
					return
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		}
	}
}

// TestEarlyAnswerDoesNotHoldLaterRequests checks a stream the server ends before the client
// has written its DATA: a server may answer on the header block alone (an error status, say)
// and reset the stream, upon which the client never writes that DATA. The requests after it
// on the same connection must go out when their own DATA is written, not wait for that DATA.
func TestEarlyAnswerDoesNotHoldLaterRequests(t *testing.T) {
	cert, addr := startEarlyAnswerServer(t, 0)
	tr, _, _ := countedTransport(t, addr, cert)
	const url = "https://example.com/push/x"
	post(t, tr, url) // the connection, answered 201 on its DATA

	//lint:ignore SA1019 the adapter's HTTP/2 connections are x/net's (see newTransport)
	var cc *http2.ClientConn
	tr.h2.mu.Lock()
	for _, conns := range tr.h2.conns {
		cc = conns[0]
	}
	tr.h2.mu.Unlock()
	if cc == nil {
		t.Fatal("no HTTP/2 connection after the first request")
	}

	// A request whose DATA is late: its header block is held until something else is written,
	// here a ping, and the server answers it 410 on the header block alone.
	body := &lateBody{reading: make(chan struct{}), release: make(chan struct{})}
	defer close(body.release)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"?early", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 359
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("not replayed") }
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Error(err)
			answered <- nil
			return
		}
		_ = resp.Body.Close()
		answered <- resp
	}()
	<-body.reading
	if err := cc.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if resp := <-answered; resp == nil || resp.StatusCode != http.StatusGone {
		t.Fatalf("the early answer: %v, want 410", resp)
	}

	for range 3 {
		start := time.Now()
		post(t, tr, url)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("a request after the early answer took %s: it was held for DATA the client will never write", d)
		}
	}
}

// TestGoAwayReleasesHeldWrites checks the writes held behind a request whose DATA is late: a
// server's graceful GOAWAY gives that request up as one to wait for, and what was held behind
// it goes out at once rather than when that DATA comes (here, never before the test ends).
func TestGoAwayReleasesHeldWrites(t *testing.T) {
	cert, addr := startEarlyAnswerServer(t, 300*time.Millisecond)
	tr, _, _ := countedTransport(t, addr, cert)
	const url = "https://example.com/push/x"
	post(t, tr, url) // the connection; the server says GOAWAY 300 ms after answering it

	body := &lateBody{reading: make(chan struct{}), release: make(chan struct{})}
	defer close(body.release)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 359
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("not replayed") }
	go func() {
		if resp, err := tr.RoundTrip(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-body.reading // its header block is held, waiting for DATA
	start := time.Now()
	post(t, tr, url) // held behind it until the GOAWAY
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a request held behind one whose DATA is late took %s after the server's GOAWAY", d)
	}
}

// lateBody is a request body whose first Read waits for release (or for its Close).
type lateBody struct {
	reading, release chan struct{}
	once             sync.Once
	closed           atomic.Bool
}

func (b *lateBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.reading) })
	<-b.release
	if b.closed.Load() {
		return 0, io.ErrClosedPipe
	}
	return 0, io.EOF
}

func (b *lateBody) Close() error { b.closed.Store(true); return nil }

// startEarlyAnswerServer is an HTTP/2 server written with the framer that answers a request
// whose path has the query "early" 410 on its header block and resets the stream with
// NO_ERROR, as a server that has no use for the body does (RFC 9113, section 8.1); any other
// request it answers 201 once its DATA has ended it. With goAwayAfter set, it sends a graceful
// GOAWAY (every stream still processed) that long after its first answer.
func startEarlyAnswerServer(t *testing.T, goAwayAfter time.Duration) (*x509.Certificate, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS()
	cert := srv.Certificate()
	tlsCert := srv.TLS.Certificates[0]
	srv.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{tlsCert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveEarlyAnswer(c, goAwayAfter)
		}
	}()
	return cert, ln.Addr().String()
}

func serveEarlyAnswer(c net.Conn, goAwayAfter time.Duration) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var wmu sync.Mutex // the GOAWAY is written from a timer
	write := func(f func() error) { wmu.Lock(); defer wmu.Unlock(); _ = f() }
	write(func() error { return fr.WriteSettings() })
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	answer := func(id uint32, status string) {
		write(func() error {
			hbuf.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: status})
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true})
		})
	}
	var goAway sync.Once
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				write(fr.WriteSettingsAck)
			}
		case *http2.MetaHeadersFrame:
			if strings.HasSuffix(f.PseudoValue("path"), "?early") {
				answer(f.StreamID, "410")
				write(func() error { return fr.WriteRSTStream(f.StreamID, http2.ErrCodeNo) })
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				answer(f.StreamID, "201")
				if goAwayAfter > 0 {
					goAway.Do(func() {
						time.AfterFunc(goAwayAfter, func() {
							write(func() error { return fr.WriteGoAway(1<<31-1, http2.ErrCodeNo, nil) })
						})
					})
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				write(func() error { return fr.WritePing(true, f.Data) })
			}
		}
	}
}
