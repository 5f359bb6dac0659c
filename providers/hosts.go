package providers

import (
	"net/netip"
	"net/url"
	"strings"
)

// checkHost validates a host as written in registry.yaml and returns it without its trailing
// dot. Entries match a host and all its subdomains, so a host is a bare lower-case DNS name:
// anything else (a URL, a port, a wildcard) is a misunderstanding worth a precise message.
func checkHost(h string) (string, string) {
	switch {
	case h == "":
		return "", "empty host name"
	case strings.Contains(h, "://"):
		if u, err := url.Parse(h); err == nil && u.Hostname() != "" {
			return "", "want a bare host name, not a URL: write " + strings.ToLower(u.Hostname())
		}
		return "", "want a bare host name, not a URL"
	case strings.Contains(h, "*"):
		bare := strings.TrimLeft(h, "*.")
		if bare != "" && !strings.Contains(bare, "*") {
			return "", "wildcards are not supported (a host already matches all its subdomains): write " + bare
		}
		return "", "wildcards are not supported (a host already matches all its subdomains)"
	case strings.Contains(h, "/"):
		return "", "want a bare host name, without a path"
	case strings.Contains(h, ":"):
		return "", "want a bare host name, without a port (an entry matches every port)"
	}
	h = strings.TrimSuffix(h, ".")
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return "", "not a valid DNS name (write an internationalised name in punycode, xn--...)"
		}
	}
	if lower := strings.ToLower(h); lower != h {
		return "", "host names are written in lower case: write " + lower
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", "want a DNS name, not an IP address (endpoints on IP addresses go to the fallback)"
	}
	if !dnsName(h, false) {
		return "", "not a valid DNS name (labels of a-z, 0-9 and '-', at most 63 bytes each)"
	}
	return h, ""
}

// dnsName reports whether h (lower case, no trailing dot) is a syntactically valid DNS host
// name. Endpoints may carry '_' (DNS allows it outside host names and some internal push
// servers use it); registry entries may not, which underscore says.
func dnsName(h string, underscore bool) bool {
	if len(h) == 0 || len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_' && underscore:
			label++
		case c == '-':
			if label == 0 || i+1 == len(h) || h[i+1] == '.' {
				return false
			}
			label++
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
			continue
		default:
			return false
		}
		if label > 63 {
			return false
		}
	}
	return label > 0
}
