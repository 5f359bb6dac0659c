package vapid

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode"
)

// appleHint ends every subject error: the rules below are the ones Apple's
// push service enforces, and its only answer is 403 BadJwtToken.
const appleHint = " (push services refuse such a sub; Apple answers 403 BadJwtToken)"

// normalizeSubject checks that sub is a contact a push service operator can
// actually reach, because Apple refuses anything else:
//
//   - mailto: with exactly one plain address: exactly one @, a non-empty local
//     part, a domain with a dot that is not localhost, *.localhost or *.local,
//     and no "mailto:mailto:";
//   - or an https: URL whose host follows the same domain rules and carries no
//     user info.
//
// Whitespace anywhere, http:, other schemes and a bare address are refused.
// The scheme may be in any case (MAILTO:, HTTPS:); NewSigner lower-cases it
// in the tokens it signs. The error says which rule failed; the subject comes back
// with its scheme lower-cased.
func normalizeSubject(sub string) (string, error) {
	reason := ""
	norm := sub
	if sub == "" {
		reason = "empty; want mailto:you@example.com or https://example.com/contact"
	} else if strings.IndexFunc(sub, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		reason = "contains whitespace or a control character"
	} else if i := strings.IndexByte(sub, ':'); i < 0 {
		if strings.Contains(sub, "@") {
			reason = fmt.Sprintf("has no scheme; did you mean %q?", "mailto:"+sub)
		} else {
			reason = "has no scheme; want mailto:you@example.com or https://example.com/contact"
		}
	} else {
		scheme := strings.ToLower(sub[:i])
		norm = scheme + sub[i:]
		switch scheme {
		case "mailto":
			reason = checkMailto(sub[i+1:])
		case "https":
			reason = checkHTTPS(norm)
		case "http":
			reason = "http: is not allowed; use an https: URL or a mailto: address"
		default:
			reason = fmt.Sprintf("scheme %q is not allowed; want mailto: or https:", scheme)
		}
	}
	if reason != "" {
		return "", fmt.Errorf("%w %q: %s%s", ErrBadSubject, sub, reason, appleHint)
	}
	return norm, nil
}

func checkMailto(addr string) string {
	if addr == "" {
		return "mailto: has no address"
	}
	if strings.HasPrefix(strings.ToLower(addr), "mailto:") {
		return `"mailto:" appears twice; write mailto:you@example.com`
	}
	if strings.ContainsAny(addr, "?,;") {
		return "mailto: must hold one plain address (no ?headers, no address list)"
	}
	if n := strings.Count(addr, "@"); n != 1 {
		return fmt.Sprintf("an address has exactly one @ (found %d)", n)
	}
	local, domain, _ := strings.Cut(addr, "@")
	if local == "" {
		return "the address has an empty local part (nothing before @)"
	}
	if strings.ContainsAny(local, `<>()[]\:"`) {
		return "the local part holds characters (<>()[]\\:\") that belong to a display name, not an address"
	}
	if r := checkDomain(domain); r != "" {
		return "the address's domain " + r
	}
	return ""
}

func checkHTTPS(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "not a parsable URL"
	}
	if u.Opaque != "" || u.Host == "" {
		return "https: URL has no host; want https://example.com/contact"
	}
	if u.User != nil {
		return "https: URL must not carry user info"
	}
	if r := checkDomain(u.Hostname()); r != "" {
		return "the URL's host " + r
	}
	return ""
}

// checkDomain returns why host is not a public domain name, or "". The
// reason completes a sentence starting with "the domain".
func checkDomain(host string) string {
	h := strings.ToLower(host)
	switch {
	case h == "":
		return "is empty"
	case net.ParseIP(strings.Trim(h, "[]")) != nil:
		return fmt.Sprintf("%q is an IP address; want a public domain name", host)
	case strings.HasSuffix(h, "."):
		return fmt.Sprintf("%q ends with a dot", host)
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return fmt.Sprintf("%q is localhost, which no one outside this machine can reach", host)
	case strings.HasSuffix(h, ".local"):
		return fmt.Sprintf("%q is a .local (mDNS) name, which is not reachable from the internet", host)
	case !strings.Contains(h, "."):
		return fmt.Sprintf("%q has no dot; want a public domain name such as example.com", host)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return fmt.Sprintf("%q has an empty label", host)
		}
		if len(label) > 63 {
			return fmt.Sprintf("%q has a label longer than 63 bytes", host)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Sprintf("%q has a label that starts or ends with '-'", host)
		}
		for _, r := range label {
			// Non-ASCII letters are allowed: internationalised domain names.
			if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return fmt.Sprintf("%q holds %q, which is not allowed in a domain name", host, r)
			}
		}
	}
	return ""
}

// Audience returns the aud claim for an endpoint: its origin
// "https://host[:port]", host lower-cased, a trailing dot dropped, port 443
// omitted, no path and no trailing slash. Push services compare aud with the
// origin they serve, so any other form is refused (FCM: 403 "aud claim in the
// token MUST include the origin"). Errors name neither the endpoint's path nor
// its user info: both are credentials.
func Audience(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		// url.Error quotes the whole URL; do not wrap it.
		return "", fmt.Errorf("%w: endpoint is not a parsable URL", ErrBadAudience)
	}
	if s := strings.ToLower(u.Scheme); s != "https" {
		if s == "" {
			return "", fmt.Errorf("%w: endpoint has no scheme; want https", ErrBadAudience)
		}
		return "", fmt.Errorf("%w: endpoint scheme is %q; push endpoints are https", ErrBadAudience, s)
	}
	if u.User != nil {
		return "", fmt.Errorf("%w: endpoint carries user info", ErrBadAudience)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" || u.Opaque != "" {
		return "", fmt.Errorf("%w: endpoint has no host", ErrBadAudience)
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return "", fmt.Errorf("%w: endpoint host is not a valid IPv6 address", ErrBadAudience)
		}
		host = "[" + ip.String() + "]" // canonical form, as providers.Resolve writes it
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: endpoint port %q is out of range", ErrBadAudience, p)
		}
		if n != 443 {
			host += ":" + strconv.Itoa(n)
		}
	}
	return "https://" + host, nil
}

// checkAudience accepts only what Audience returns for itself, so a caller
// that passes a whole endpoint gets an error instead of a token (and a cache
// entry) per subscription carrying the endpoint's secret path.
func checkAudience(aud string) error {
	origin, err := Audience(aud)
	if err != nil {
		return err
	}
	if origin != aud {
		return fmt.Errorf("%w: audience is not an origin; pass Audience(endpoint), here %q", ErrBadAudience, origin)
	}
	return nil
}
