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
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// Health checks on idle HTTP/2 connections: a push service that silently drops a connection
// (a NAT timeout, a load balancer restart) is found by a ping, not by the next push timing out.
// The fallback's connections are not pinged: they are closed after FallbackIdleTTL without a
// request, sooner than a ping would be sent, and net/http's HTTP/2 client keeps a closed
// connection's buffers until its ping timer fires, so with pings each one-off host would hold
// them for pingAfterIdle after its connection closed.
const (
	pingAfterIdle = 30 * time.Second
	pingTimeout   = 10 * time.Second
)

// maxIdleConnsPerHost bounds one host's idle HTTP/1.1 connections (HTTP/2 multiplexes).
const maxIdleConnsPerHost = 16

// maxResponseBody is how much of an answer is read: enough for every error shape a push
// service sends, little enough that a hostile self-hosted server cannot fill memory.
const maxResponseBody = 64 << 10

// newTransport builds the pooled transport of one provider, with its connection budget (see
// ListedIdleConns). HTTP/2 is negotiated by ALPN with HTTP/1.1 as the fallback for self-hosted
// servers that do not offer h2. The HTTP/2 settings are the standard library's
// http.HTTP2Config: golang.org/x/net/http2's ConfigureTransports is deprecated in its favour and
// drives the same implementation.
func newTransport(p *providers.Provider, d *dialer, roots *x509.CertPool) *budgetedTransport {
	idle, ttl, ping := ListedIdleConns, ListedIdleTTL, pingAfterIdle
	if p.ID == providers.FallbackID {
		idle, ttl, ping = FallbackIdleConns, FallbackIdleTTL, 0
	}
	budget := newConnBudget(idle)
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return budget.track(normalizeAuthority(address), c), nil
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	return &budgetedTransport{budget: budget, proxy: d.proxy, Transport: &http.Transport{
		// The dialer opens any proxy's tunnel itself, to the address it checked: net/http's
		// own proxying would hand the proxy the name to resolve, past the address checks.
		Proxy:       nil,
		DialContext: dial,
		TLSClientConfig: &tls.Config{
			RootCAs:    roots,
			MinVersion: tls.VersionTLS12,
		},
		TLSHandshakeTimeout:    p.TLSTimeout,
		ResponseHeaderTimeout:  p.ResponseHeaderTimeout,
		IdleConnTimeout:        ttl,
		MaxIdleConns:           idle,
		MaxIdleConnsPerHost:    min(maxIdleConnsPerHost, idle),
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
		Protocols:              protocols,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: ping,
			PingTimeout:     pingTimeout,
		},
	}}
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
