package adapter

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// Proxy is an HTTP CONNECT proxy the dialer tunnels through. The dialer resolves and checks
// the endpoint's address itself and asks the proxy for that address, never for a name, so the
// proxy resolves nothing and cannot be used to reach an address the checks refuse.
type Proxy struct {
	url  *url.URL // scheme and host:port only
	auth string   // the Proxy-Authorization value; "" without credentials
	// noProxy, from NO_PROXY with ProxyEnv, lists the hosts that are dialled direct.
	noProxy []noProxyRule
	// roots verify an https:// proxy's certificate; nil means the system roots.
	roots *x509.CertPool
	// watch hears of every tunnel's success or failure (metrics); nil for none.
	watch ProxyWatcher
}

// ProxyWatcher hears how each tunnel through a proxy went: err is nil when the proxy opened it.
// Reason is one of the ProxyReason* values. It is called from dials, concurrently.
type ProxyWatcher func(proxy string, reason string, err error)

// The bounded reasons a tunnel fails for, as metrics label them.
const (
	ProxyReasonRefused = "connect" // the proxy could not be reached (refused, unreachable, DNS)
	ProxyReasonTimeout = "timeout" // the proxy did not answer in time
	ProxyReasonAuth    = "auth"    // 407: credentials missing or refused
	ProxyReasonStatus  = "status"  // any other non-2xx answer to CONNECT (502 and friends)
	ProxyReasonTLS     = "tls"     // an https:// proxy's own TLS failed
	ProxyReasonBad     = "protocol"
)

// Addr is the proxy's host:port: the name it goes by in outcomes, metrics and status.
func (p *Proxy) Addr() string {
	if p == nil {
		return ""
	}
	return p.url.Host
}

// String is the proxy's URL without credentials.
func (p *Proxy) String() string {
	if p == nil {
		return ""
	}
	return p.url.String()
}

// WithWatcher returns a copy of p whose tunnels are reported to w.
func (p *Proxy) WithWatcher(w ProxyWatcher) *Proxy {
	if p == nil {
		return nil
	}
	c := *p
	c.watch = w
	return &c
}

// ProxyOptions is how the worker's proxy is chosen.
type ProxyOptions struct {
	// Spec is the proxy: a URL, "env" (HTTPS_PROXY and NO_PROXY), or "none" or "" for direct.
	Spec string
	// CredentialsFile holds user:password for the proxy; "" for none (or the URL's own).
	CredentialsFile string
	// Getenv reads the environment for "env"; nil means os.Getenv.
	Getenv func(string) string
	// RootCAs verify an https:// proxy; nil means the system roots.
	RootCAs *x509.CertPool
}

// ProxyError is a tunnel the proxy did not open: nothing reached the push service. It never
// quotes credentials.
type ProxyError struct {
	Proxy  string // host:port
	Reason string // one of the ProxyReason* values
	Status int    // the proxy's answer to CONNECT, 0 when there was none
	Err    error  // the cause when there was no answer
}

func (e *ProxyError) Error() string {
	if e.Status != 0 {
		msg := fmt.Sprintf("adapter: proxy %s answered CONNECT with %d %s", e.Proxy, e.Status, http.StatusText(e.Status))
		if e.Status == http.StatusProxyAuthRequired {
			msg += " (check the worker's proxy credentials)"
		}
		return msg
	}
	return fmt.Sprintf("adapter: proxy %s: %v", e.Proxy, e.Err)
}

func (e *ProxyError) Unwrap() error { return e.Err }

// ProxyOptionError is a ProxyOptions field that ParseProxy refused: Option is its name ("Spec"
// or "CredentialsFile"), so that a command names its own flag.
type ProxyOptionError struct {
	Option string
	Err    error
}

func (e *ProxyOptionError) Error() string { return "adapter: proxy " + e.Option + ": " + e.Err.Error() }
func (e *ProxyOptionError) Unwrap() error { return e.Err }

func specError(err error) error  { return &ProxyOptionError{Option: "Spec", Err: err} }
func credsError(err error) error { return &ProxyOptionError{Option: "CredentialsFile", Err: err} }

// ParseProxy builds the worker's proxy from its options; nil means direct. Its errors are
// *ProxyOptionError and never quote a credential.
func ParseProxy(o ProxyOptions) (*Proxy, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	spec := strings.TrimSpace(o.Spec)
	var noProxy []noProxyRule
	switch spec {
	case "", providers.ProxyNone:
		if o.CredentialsFile != "" {
			return nil, credsError(errors.New("given without a proxy (a proxy URL or env)"))
		}
		return nil, nil
	case "env":
		spec = firstEnv(getenv, "HTTPS_PROXY", "https_proxy")
		if spec == "" {
			return nil, specError(errors.New("env: HTTPS_PROXY is not set; set it, or give the proxy's URL or none"))
		}
		noProxy = parseNoProxy(firstEnv(getenv, "NO_PROXY", "no_proxy"))
	}
	u, creds, err := providers.ParseProxyURL(spec)
	if err != nil {
		if o.Spec == "env" {
			return nil, specError(fmt.Errorf("env: HTTPS_PROXY: %w", err))
		}
		return nil, specError(err)
	}
	if o.CredentialsFile != "" {
		if creds != "" {
			return nil, credsError(errors.New("the proxy URL carries credentials too; give them one way"))
		}
		if creds, err = readCredentials(o.CredentialsFile); err != nil {
			return nil, credsError(err)
		}
	}
	return newProxy(u, creds, noProxy, o.RootCAs), nil
}

func newProxy(u *url.URL, creds string, noProxy []noProxyRule, roots *x509.CertPool) *Proxy {
	p := &Proxy{url: u, noProxy: noProxy, roots: roots}
	if creds != "" {
		p.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(creds))
	}
	return p
}

// forProvider is the proxy a provider's transport uses: its registry proxy (none for direct)
// or the worker's. A registry proxy at the worker's proxy's host:port gets the worker's
// credentials; one elsewhere gets none, so credentials only ever go to the proxy they were
// given for.
func (p *Proxy) forProvider(setting string) (*Proxy, error) {
	switch setting {
	case "":
		return p, nil
	case providers.ProxyNone:
		return nil, nil
	}
	u, _, err := providers.ParseProxyURL(setting)
	if err != nil {
		return nil, err
	}
	if p != nil && p.url.Host == u.Host && p.url.Scheme == u.Scheme {
		return p, nil
	}
	np := newProxy(u, "", nil, nil)
	if p != nil {
		np.roots, np.watch = p.roots, p.watch
	}
	return np, nil
}

func firstEnv(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// readCredentials reads user:password from the first line of file.
func readCredentials(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSuffix(line, "\r")
	user, _, ok := strings.Cut(line, ":")
	if !ok || user == "" {
		return "", fmt.Errorf("%s: want user:password on its first line", file)
	}
	return line, nil
}

// noProxyRule is one NO_PROXY entry: a domain (itself and its subdomains), an address, or a
// prefix; "*" matches everything.
type noProxyRule struct {
	all    bool
	domain string
	prefix netip.Prefix
}

func parseNoProxy(v string) []noProxyRule {
	var rules []noProxyRule
	for _, f := range strings.Split(v, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		if f == "*" {
			rules = append(rules, noProxyRule{all: true})
			continue
		}
		if pfx, err := netip.ParsePrefix(f); err == nil {
			rules = append(rules, noProxyRule{prefix: pfx.Masked()})
			continue
		}
		if h, _, err := net.SplitHostPort(f); err == nil {
			f = h
		}
		if a, err := netip.ParseAddr(strings.Trim(f, "[]")); err == nil {
			rules = append(rules, noProxyRule{prefix: netip.PrefixFrom(a, a.BitLen())})
			continue
		}
		rules = append(rules, noProxyRule{domain: strings.TrimSuffix(strings.TrimPrefix(f, "."), ".")})
	}
	return rules
}

// bypass reports whether NO_PROXY sends host (a name or an address literal) direct.
func (p *Proxy) bypass(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	addr, addrErr := netip.ParseAddr(host)
	for _, r := range p.noProxy {
		switch {
		case r.all:
			return true
		case r.domain != "":
			if host == r.domain || strings.HasSuffix(host, "."+r.domain) {
				return true
			}
		case addrErr == nil && r.prefix.Contains(addr.Unmap()):
			return true
		}
	}
	return false
}

// tunnel connects to the proxy and asks it for target ("ip:port", already checked). The
// returned connection carries the tunnel: TLS to the push service runs over it.
func (p *Proxy) tunnel(ctx context.Context, nd *net.Dialer, target string) (net.Conn, error) {
	c, err := p.open(ctx, nd, target)
	if p.watch != nil {
		reason := ""
		var pe *ProxyError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		p.watch(p.url.Host, reason, err)
	}
	return c, err
}

func (p *Proxy) open(ctx context.Context, nd *net.Dialer, target string) (net.Conn, error) {
	fail := func(reason string, status int, err error) error {
		return &ProxyError{Proxy: p.url.Host, Reason: reason, Status: status, Err: err}
	}
	conn, err := nd.DialContext(ctx, "tcp", p.url.Host)
	if err != nil {
		return nil, fail(dialReason(ctx, err), 0, err)
	}
	// The connect timeout bounds the whole tunnel set-up; the push service's own TLS and
	// request have their timeouts after it.
	var deadline time.Time
	if nd.Timeout > 0 {
		deadline = time.Now().Add(nd.Timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if p.url.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: p.url.Hostname(), RootCAs: p.roots, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fail(ProxyReasonTLS, 0, err)
		}
		conn = tc
	}
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if p.auth != "" {
		req += "Proxy-Authorization: " + p.auth + "\r\n"
	}
	req += "\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		conn.Close()
		return nil, fail(dialReason(ctx, err), 0, err)
	}
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		reason := ProxyReasonBad
		if r := dialReason(ctx, err); r == ProxyReasonTimeout {
			reason = r
		}
		return nil, fail(reason, 0, fmt.Errorf("reading the answer to CONNECT: %w", err))
	}
	if resp.StatusCode/100 != 2 {
		conn.Close()
		reason := ProxyReasonStatus
		if resp.StatusCode == http.StatusProxyAuthRequired {
			reason = ProxyReasonAuth
		}
		return nil, fail(reason, resp.StatusCode, nil)
	}
	if !stop() {
		// ctx ended while the answer came: the deadline in the past is set or about to be.
		conn.Close()
		return nil, fail(ProxyReasonTimeout, 0, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// A proxy may send the first bytes of the tunnel with its answer.
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

func dialReason(ctx context.Context, err error) string {
	var ne net.Error
	if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
		return ProxyReasonTimeout
	}
	return ProxyReasonRefused
}

// bufferedConn reads what the CONNECT answer's reader holds before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
