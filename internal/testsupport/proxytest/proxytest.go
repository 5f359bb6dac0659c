// Package proxytest runs a small HTTP CONNECT proxy on loopback for tests of the egress proxy:
// it counts and records the CONNECTs it is asked for, can require Basic credentials (407
// without them), can answer every CONNECT with a status of the test's choosing (502), can
// serve https:// (TLS to the proxy itself), and can be stopped and started again on the same
// port, to play a proxy that dies and comes back.
//
// The proxy resolves nothing: a CONNECT target that is not an IP:port is answered 400 and
// counted in Names, so a test can assert that the gateway never asks a proxy for a name.
package proxytest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Config is how a Proxy behaves.
type Config struct {
	// User and Password, when User is set, are the Basic credentials every CONNECT must carry.
	User, Password string
	// TLS serves the proxy over TLS (an https:// proxy) with a certificate for 127.0.0.1 that
	// CertPool trusts.
	TLS bool
}

// Proxy is a running CONNECT proxy.
type Proxy struct {
	t    testing.TB
	cfg  Config
	addr string
	tls  *tls.Config
	pool *x509.CertPool

	connects atomic.Int64 // CONNECT requests seen, answered or not
	refused  atomic.Int64 // answered 407
	names    atomic.Int64 // targets that were not an address
	status   atomic.Int64 // 0, or the status every CONNECT gets

	mu      sync.Mutex
	ln      net.Listener          // nil while stopped
	conns   map[net.Conn]struct{} // open client and upstream connections
	targets []string
	wg      sync.WaitGroup
}

// Start runs a proxy on a free loopback port until the test ends.
func Start(t testing.TB, cfg Config) *Proxy {
	t.Helper()
	p := &Proxy{t: t, cfg: cfg, conns: map[net.Conn]struct{}{}}
	if cfg.TLS {
		p.tls, p.pool = selfSigned(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL is the proxy's URL, without credentials.
func (p *Proxy) URL() string {
	if p.cfg.TLS {
		return "https://" + p.addr
	}
	return "http://" + p.addr
}

// CertPool trusts the certificate of a TLS proxy (nil otherwise).
func (p *Proxy) CertPool() *x509.CertPool { return p.pool }

// Connects is how many CONNECT requests the proxy has read.
func (p *Proxy) Connects() int64 { return p.connects.Load() }

// AuthRefused is how many CONNECTs were answered 407.
func (p *Proxy) AuthRefused() int64 { return p.refused.Load() }

// Names is how many CONNECTs asked for a host name rather than an address.
func (p *Proxy) Names() int64 { return p.names.Load() }

// Targets are the CONNECT targets asked for, in order.
func (p *Proxy) Targets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// AnswerAll makes every later CONNECT get status without a tunnel; 0 goes back to tunnelling.
func (p *Proxy) AnswerAll(status int) { p.status.Store(int64(status)) }

// Stop closes the listener and every open tunnel: the proxy is gone, connections to its port
// are refused. Stopping a stopped proxy does nothing.
func (p *Proxy) Stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.wg.Wait()
}

// Restart listens again on the same port after Stop.
func (p *Proxy) Restart() {
	p.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was ours a moment ago; a TIME_WAIT socket may hold it briefly
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxytest: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	if p.tls != nil {
		ln = tls.NewListener(ln, p.tls)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.track(c) {
				c.Close()
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.handle(c)
			}()
		}
	}()
}

// track adds c to the open connections, unless the proxy is stopping.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) handle(c net.Conn) {
	defer p.untrack(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		answer(c, http.StatusMethodNotAllowed)
		return
	}
	p.connects.Add(1)
	p.mu.Lock()
	p.targets = append(p.targets, req.Host)
	p.mu.Unlock()
	if p.cfg.User != "" {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(p.cfg.User+":"+p.cfg.Password))
		if req.Header.Get("Proxy-Authorization") != want {
			p.refused.Add(1)
			_, _ = io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"proxytest\"\r\nContent-Length: 0\r\n\r\n")
			return
		}
	}
	if s := p.status.Load(); s != 0 {
		answer(c, int(s))
		return
	}
	if _, err := netip.ParseAddrPort(req.Host); err != nil {
		p.names.Add(1)
		answer(c, http.StatusBadRequest)
		return
	}
	up, err := net.DialTimeout("tcp", req.Host, 5*time.Second)
	if err != nil {
		answer(c, http.StatusBadGateway)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	_ = c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		// What the client sent after its CONNECT may already sit in br.
		_, _ = io.Copy(up, br)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(c, up)
	c.Close()
	<-done
}

func answer(c net.Conn, status int) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, http.StatusText(status))
}

// selfSigned is a TLS configuration for 127.0.0.1 and the pool that trusts it.
func selfSigned(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "proxytest"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}
