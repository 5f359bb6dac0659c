package adapter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is wrapped by every refusal to connect to an address inside the network.
var ErrBlocked = errors.New("adapter: address not allowed")

// BlockedError says which address the dialer refused and why; it wraps ErrBlocked.
type BlockedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("adapter: refused to connect to %s (%s)", e.Addr, e.Reason)
}

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// blockedRanges are the destinations an endpoint taken from a client must never reach. They are
// checked against the address actually being connected to, after DNS, so a name that resolves
// to an inside address (or rebinds to one) is refused too.
var blockedRanges = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated; may reach an inside IPv4 address)"},
	{netip.MustParsePrefix("2001::/32"), "Teredo (may reach an inside IPv4 address)"},
	{netip.MustParsePrefix("2002::/16"), "6to4 (may reach an inside IPv4 address)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (may reach an inside IPv4 address)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64 (may reach an inside IPv4 address)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private, cloud metadata)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// checkAddr refuses an address in a blocked range unless an operator allowed it.
func checkAddr(a netip.Addr, allow []netip.Prefix) error {
	a = a.Unmap().WithZone("") // ::ffff:10.0.0.1 is 10.0.0.1; a zone would hide fe80::1 from Contains
	for _, p := range allow {
		if p.Contains(a) {
			return nil
		}
	}
	for _, b := range blockedRanges {
		if b.prefix.Contains(a) {
			return &BlockedError{Addr: a, Reason: b.reason}
		}
	}
	return nil
}

// dialer connects for one provider's transport. Overridden authorities (connect-to) are
// operator configuration and dial their target as given; every other connection is checked at
// connect time against the blocked ranges. With a proxy, the dialer resolves and checks the
// endpoint's host itself and asks the proxy for a tunnel to the checked address (a connect-to
// target as given), so a blocked address is refused before the proxy hears of it.
type dialer struct {
	connectTo map[string]string // "host:port" -> "addr:port"; immutable after New
	allow     []netip.Prefix    // immutable after New
	timeout   time.Duration
	resolver  *net.Resolver
	proxy     *Proxy // nil: direct
}

func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: d.timeout, KeepAlive: 30 * time.Second, Resolver: d.resolver}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("adapter: unexpected dial address %q: %w", address, err)
	}
	proxy := d.proxy
	if proxy != nil && proxy.bypass(host) {
		proxy = nil
	}
	if target, ok := d.connectTo[normalizeAuthority(address)]; ok {
		if proxy != nil {
			return proxy.tunnel(ctx, nd, target)
		}
		return nd.DialContext(ctx, network, target)
	}
	if proxy == nil {
		nd.Control = func(_, addr string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return fmt.Errorf("adapter: unexpected dial address %q: %w", addr, err)
			}
			return checkAddr(ap.Addr(), d.allow)
		}
		return nd.DialContext(ctx, network, address)
	}
	addrs, err := d.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	var refused error
	for _, a := range addrs {
		if err := checkAddr(a, d.allow); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		if proxy.bypass(a.Unmap().String()) {
			return nd.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		}
		// The first allowed address only: a proxy that fails for one fails for the others.
		return proxy.tunnel(ctx, nd, net.JoinHostPort(a.Unmap().String(), port))
	}
	return nil, refused
}

// lookup resolves host (or reads it as an address literal) the way net.Dialer would.
func (d *dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	r := d.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// normalizeAuthority folds a host:port the way routing does: lower case, no trailing dot.
func normalizeAuthority(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.ToLower(hostport)
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.ToLower(host), "."), port)
}

// ParseConnectTo reads overrides in curl's --connect-to spirit, "host:port=addr:port", and
// returns them keyed by the normalised "host:port". The target is trusted configuration: it
// may be on loopback, which is how tests and the demo reach pushsim under real host names.
func ParseConnectTo(specs []string) (map[string]string, error) {
	out := make(map[string]string, len(specs))
	for _, s := range specs {
		from, to, ok := strings.Cut(strings.TrimSpace(s), "=")
		if !ok {
			return nil, fmt.Errorf("adapter: connect-to %q: want host:port=addr:port", s)
		}
		fh, fp, err := net.SplitHostPort(from)
		if err != nil || fh == "" || fp == "" {
			return nil, fmt.Errorf("adapter: connect-to %q: %q is not host:port", s, from)
		}
		th, tp, err := net.SplitHostPort(to)
		if err != nil || th == "" || tp == "" {
			return nil, fmt.Errorf("adapter: connect-to %q: %q is not addr:port", s, to)
		}
		key := normalizeAuthority(net.JoinHostPort(fh, fp))
		if prev, dup := out[key]; dup && prev != to {
			return nil, fmt.Errorf("adapter: connect-to %q: %s is already sent to %s", s, key, prev)
		}
		out[key] = net.JoinHostPort(th, tp)
	}
	return out, nil
}
