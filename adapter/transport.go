//lint:file-ignore SA1019 golang.org/x/net/http2 marks its client deprecated in favour of net/http's, which cannot run over a connection of ours (see newTransport)

package adapter

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// Health checks on idle HTTP/2 connections: a push service that silently drops a connection
// (a NAT timeout, a load balancer restart) is found by a ping, not by the next push timing out.
// The fallback's connections are not pinged: they are closed after FallbackIdleTTL without a
// request, sooner than a ping would be sent.
const (
	pingAfterIdle = 30 * time.Second
	pingTimeout   = 10 * time.Second
)

// maxIdleConnsPerHost bounds one host's idle HTTP/1.1 connections (HTTP/2 multiplexes).
const maxIdleConnsPerHost = 16

// maxResponseBody is how much of an answer is read: enough for every error shape a push
// service sends, little enough that a hostile self-hosted server cannot fill memory.
const maxResponseBody = 64 << 10

// dialFunc opens the plain connection a transport runs TLS over, to the address a request
// names ("host:port"); the address checks happen in it, at connect time.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// newTransport builds the pooled transport of one provider, with its connection budget (see
// ListedIdleConns). Each connection offers h2 and http/1.1 by ALPN and is used as the server
// chose: HTTP/1.1, for self-hosted services that do not offer h2, on net/http's own client;
// HTTP/2 on golang.org/x/net/http2's, which, unlike the copy bundled in net/http, runs over a
// connection it is given, so that a coalescingConn can sit between its framer and TLS. Both
// share net/http's pool of dials and its settings (timeouts, header and idle limits).
func newTransport(p *providers.Provider, dial dialFunc, roots *x509.CertPool) *budgetedTransport {
	hc := healthCheck{after: pingAfterIdle, timeout: pingTimeout}
	if p.ID == providers.FallbackID {
		hc.after = 0
	}
	return newTransportWith(p, dial, roots, hc)
}

// healthCheck is when an idle HTTP/2 connection is pinged (after; 0 never) and how long its
// answer may take before the connection is closed.
type healthCheck struct{ after, timeout time.Duration }

func newTransportWith(p *providers.Provider, dial dialFunc, roots *x509.CertPool, hc healthCheck) *budgetedTransport {
	idle, ttl := ListedIdleConns, ListedIdleTTL
	if p.ID == providers.FallbackID {
		idle, ttl = FallbackIdleConns, FallbackIdleTTL
	}
	budget := newConnBudget(idle)
	tlsConfig := &tls.Config{
		RootCAs:    roots,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		// A push is small and its frames are written together (coalescingConn): one record
		// each write, rather than the small first records that speed a browser's first paint
		// and cost a system call each.
		DynamicRecordSizingDisabled: true,
	}
	handshakeTimeout := p.TLSTimeout
	dialTLS := func(ctx context.Context, network, address string) (net.Conn, error) {
		raw, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		c := budget.track(normalizeAuthority(address), raw)
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		cfg := tlsConfig.Clone()
		cfg.ServerName = host // the endpoint's host, whatever address the dial reached
		tc := tls.Client(c, cfg)
		hctx := ctx
		if handshakeTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, handshakeTimeout)
			defer cancel()
		}
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = c.Close()
			if hctx.Err() != nil && ctx.Err() == nil {
				return nil, errHandshakeTimeout
			}
			return nil, err
		}
		return tc, nil
	}
	h1 := &http.Transport{
		// The dialer opens any proxy's tunnel itself, to the address it checked: net/http's
		// own proxying would hand the proxy the name to resolve, past the address checks.
		Proxy:                  nil,
		DialTLSContext:         dialTLS,
		ResponseHeaderTimeout:  p.ResponseHeaderTimeout,
		IdleConnTimeout:        ttl,
		MaxIdleConns:           idle,
		MaxIdleConnsPerHost:    min(maxIdleConnsPerHost, idle),
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	// ConfigureTransports links the HTTP/2 client to h1's settings (response header and idle
	// timeouts, header limits) and registers it for the connections that negotiate h2; the
	// registration is then pointed at a coalescingConn over the TLS connection, and the
	// HTTP/2 client's pool at ours, which holds those connections.
	h2, err := http2.ConfigureTransports(h1)
	if err != nil {
		panic("adapter: " + err.Error()) // only a transport configured twice fails
	}
	pool := &h2Pool{conns: make(map[string][]*http2.ClientConn)}
	h2.ConnPool = pool
	h2.ReadIdleTimeout = hc.after
	h2.PingTimeout = hc.timeout
	h1.TLSNextProto[http2.NextProtoTLS] = func(authority string, tc *tls.Conn) http.RoundTripper {
		// net/http dials once for each request that found no connection, so a burst to a new
		// host dials many; the first one to negotiate h2 serves them all (HTTP/2 multiplexes)
		// and the others are closed at once, as net/http's bundled client does.
		if pool.usable(authority) {
			_ = tc.Close()
			return h2
		}
		cc, err := h2.NewClientConn(newCoalescingConn(tc))
		if err != nil {
			_ = tc.Close()
			return erringRoundTripper{err}
		}
		pool.add(authority, cc)
		return h2
	}
	return &budgetedTransport{budget: budget, h1: h1, h2: pool}
}

// errHandshakeTimeout says what net/http said of a handshake past TLSHandshakeTimeout when it
// did the handshake itself, so that the outcome of one reads as it always has.
var errHandshakeTimeout = errors.New("net/http: TLS handshake timeout")

// erringRoundTripper answers every request with the error that set up its connection.
type erringRoundTripper struct{ err error }

func (rt erringRoundTripper) RoundTrip(*http.Request) (*http.Response, error) { return nil, rt.err }

// RoundTripErr is what net/http looks for on the round tripper of a failed upgrade: with it,
// the connection is dropped and the next request dials again, rather than the dead connection
// staying in the idle pool and failing every request to its host until it times out.
func (rt erringRoundTripper) RoundTripErr() error { return rt.err }

// h2Pool holds a transport's HTTP/2 connections by the "host:port" they were dialed for. It
// never dials: net/http does, and hands each connection that negotiated h2 to add.
type h2Pool struct {
	mu    sync.Mutex
	conns map[string][]*http2.ClientConn // guarded by mu
}

func (p *h2Pool) add(addr string, cc *http2.ClientConn) {
	key := normalizeAuthority(addr)
	p.mu.Lock()
	p.conns[key] = append(p.conns[key], cc)
	p.mu.Unlock()
}

// usable says whether a connection to addr can take another request.
func (p *h2Pool) usable(addr string) bool {
	key := normalizeAuthority(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.conns[key] {
		if cc.CanTakeNewRequest() {
			return true
		}
	}
	return false
}

// GetClientConn reserves a stream on a connection to addr, or says there is none, upon which
// net/http dials one.
func (p *h2Pool) GetClientConn(_ *http.Request, addr string) (*http2.ClientConn, error) {
	key := normalizeAuthority(addr)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.conns[key] {
		if cc.ReserveNewRequest() {
			return cc, nil
		}
	}
	return nil, http2.ErrNoCachedConn
}

func (p *h2Pool) MarkDead(dead *http2.ClientConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, cs := range p.conns {
		if i := slices.Index(cs, dead); i >= 0 {
			cs = slices.Delete(cs, i, i+1)
			if len(cs) == 0 {
				delete(p.conns, key)
			} else {
				p.conns[key] = cs
			}
			return
		}
	}
}

// closeIdle closes the connections no request is using or has reserved; a request that finds
// none left dials anew.
func (p *h2Pool) closeIdle() {
	var idle []*http2.ClientConn
	p.mu.Lock()
	for key, cs := range p.conns {
		kept := cs[:0]
		for _, cc := range cs {
			st := cc.State()
			if st.StreamsActive == 0 && st.StreamsReserved == 0 && st.StreamsPending == 0 {
				idle = append(idle, cc)
				continue
			}
			kept = append(kept, cc)
		}
		if len(kept) == 0 {
			delete(p.conns, key)
		} else {
			p.conns[key] = kept
		}
	}
	p.mu.Unlock()
	for _, cc := range idle {
		_ = cc.Close()
	}
}

// LoadRootCAs returns the system roots plus the certificates in caFile (PEM), for push
// services behind a private CA (a self-hosted Autopush, or pushsim in tests). An empty caFile
// returns nil: the system roots.
func LoadRootCAs(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("adapter: CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("adapter: CA file %s: %w", caFile, errNoCerts)
	}
	return pool, nil
}

var errNoCerts = errors.New("no PEM certificate found")
