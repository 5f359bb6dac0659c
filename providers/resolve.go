package providers

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxEndpointLen bounds the endpoints Resolve accepts. Real ones are a few hundred bytes (WNS
// channel URIs are the longest); endpoints are client-supplied, so anything far beyond is refused
// before it is parsed, kept in Redis or hashed into logs.
const MaxEndpointLen = 8 << 10

// Route is where one endpoint goes.
type Route struct {
	Provider *Provider
	// URL is the endpoint exactly as url.Parse returned it. Nothing is re-encoded: WNS needs the
	// channel URI byte for byte, and RawPath/RawQuery keep what the browser gave us. It may be
	// shared with the job it came from (ResolveParsed): read it, never change it.
	URL *url.URL
	// Authority is the normalised host[:port]: lower case, one trailing dot dropped, IPv6 in
	// brackets, the default port 443 left out. It is the key of the per-host breaker and the
	// origin host of the VAPID audience.
	Authority string
	// Unknown is true when no entry lists the host and the fallback took it.
	Unknown bool
	// Endpoint is the original string, for callers that must send it unchanged.
	Endpoint string
}

// Resolve finds the provider for a push endpoint. It fails with ErrNotHTTPS for any scheme but
// https and with ErrBadEndpoint for anything that is not an absolute URL with a usable host.
// Error texts never contain the endpoint: its path is a bearer credential.
//
// An IP-literal host is accepted and goes to the fallback: whether that address may be dialled
// is the dialer's decision (it checks resolved addresses anyway, so refusing literals here would
// add nothing).
func (r *Registry) Resolve(endpoint string) (Route, error) {
	return r.ResolveParsed(endpoint, nil)
}

// ResolveParsed is Resolve of an endpoint its caller has already parsed: u is what
// url.Parse(endpoint) returned, or nil to have it parsed here. A job's endpoint is parsed when
// the job is decoded (job.Parsed), and every stage that routes it after that reuses the parse.
// The Route's URL is u itself: it is shared, and nobody may change it.
func (r *Registry) ResolveParsed(endpoint string, u *url.URL) (Route, error) {
	if len(endpoint) > MaxEndpointLen {
		return Route{}, fmt.Errorf("%w: longer than %d bytes", ErrBadEndpoint, MaxEndpointLen)
	}
	if u == nil {
		var err error
		if u, err = url.Parse(endpoint); err != nil {
			// Not wrapped: *url.Error quotes the whole endpoint.
			return Route{}, fmt.Errorf("%w: not a URL", ErrBadEndpoint)
		}
	}
	switch {
	case u.Scheme == "":
		return Route{}, fmt.Errorf("%w: not an absolute URL", ErrBadEndpoint)
	case u.Scheme != "https":
		// url.Parse lower-cases the scheme; a short, known-safe token is fine to show.
		return Route{}, fmt.Errorf("%w: scheme %.16q", ErrNotHTTPS, u.Scheme)
	case u.Opaque != "":
		return Route{}, fmt.Errorf("%w: no host", ErrBadEndpoint)
	case u.User != nil:
		return Route{}, fmt.Errorf("%w: user information in the URL", ErrBadEndpoint)
	}
	host, ip, err := normalHost(u.Hostname())
	if err != nil {
		return Route{}, err
	}
	authority := host
	if ip.Is6() {
		authority = "[" + host + "]"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Route{}, fmt.Errorf("%w: port out of range", ErrBadEndpoint)
		}
		if n != 443 {
			authority += ":" + strconv.Itoa(n)
		}
	}
	rt := Route{URL: u, Authority: authority, Endpoint: endpoint}
	if !ip.IsValid() {
		rt.Provider = r.match(host)
	}
	if rt.Provider == nil {
		rt.Provider, rt.Unknown = r.fallback, true
		r.unknown.Add(1)
	}
	return rt, nil
}

// match returns the entry listing the longest label suffix of host, or nil. A map probe per
// label keeps it O(labels) whatever the registry size, and probing whole labels is what makes
// "evilgoogleapis.com" miss "googleapis.com".
func (r *Registry) match(host string) *Provider {
	for s := host; ; {
		if p, ok := r.bySuffix[s]; ok {
			return p
		}
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return nil
		}
		s = s[i+1:]
	}
}

// normalHost lower-cases h and drops one trailing dot. It returns the parsed address when h is
// an IP literal (in canonical form), and ErrBadEndpoint when h is neither an IP nor a DNS name.
func normalHost(h string) (string, netip.Addr, error) {
	if h == "" {
		return "", netip.Addr{}, fmt.Errorf("%w: no host", ErrBadEndpoint)
	}
	for i := 0; i < len(h); i++ {
		// Before lower-casing: strings.ToLower maps some non-ASCII letters (the Kelvin sign)
		// to ASCII ones, which would let a host we never dial match an entry.
		if h[i] >= 0x80 {
			return "", netip.Addr{}, fmt.Errorf("%w: non-ASCII host (want punycode)", ErrBadEndpoint)
		}
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.ContainsAny(h, ":%") || (h != "" && h[len(h)-1] >= '0' && h[len(h)-1] <= '9') {
		// Looks like an address (IPv6 always has ':'; an IPv4 ends in a digit). Most DNS names
		// end in a letter, so ParseAddr runs only when it may succeed.
		if ip, err := netip.ParseAddr(h); err == nil {
			if ip.Zone() != "" {
				return "", netip.Addr{}, fmt.Errorf("%w: IPv6 zone in host", ErrBadEndpoint)
			}
			return ip.String(), ip, nil
		}
	}
	if !dnsName(h, true) {
		return "", netip.Addr{}, fmt.Errorf("%w: host is not a DNS name or IP address", ErrBadEndpoint)
	}
	return h, netip.Addr{}, nil
}
