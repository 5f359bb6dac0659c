package taxonomy

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Redacted is what stands in a detail where a part of the endpoint was.
const Redacted = "<redacted>"

// minSecret is the length from which a path segment or a query value is taken for a
// credential: push tokens are tens to hundreds of characters, while the shorter segments are
// the words of a service's URL scheme (fcm, send, wpush, v2, w), which help an operator and give
// nothing away.
const minSecret = 8

// maxSecrets bounds the secrets of one endpoint, and so the passes Redact makes over a detail. A
// push service's endpoint has a handful (FCM's: the endpoint, its path, the token); one with
// more long segments than that is made up to cost CPU, and its longest parts (the endpoint, the
// path as a whole) still go first.
const maxSecrets = 32

// Secrets are the parts of one endpoint that no detail may hold: the endpoint itself, its path
// and query, and every path segment and query value of 8 bytes or more, as written and
// percent-decoded. An endpoint's path is the subscription's bearer credential, and it turns up in
// error text with or without its scheme and host: services echo it ("no such subscription
// /wpush/v2/gAAAA..."), and Go's transport errors quote the whole URL (a *url.Error does).
//
// Redaction lives here rather than in the adapter, which is the one that knows the endpoint,
// because this package builds, cleans and cuts every detail: the secrets are replaced before the
// detail is cut to 256 bytes, so a token cut in half at the limit cannot leave its first half
// behind. The adapter makes every outcome of a send through the Secrets of its endpoint:
// classified answers (ClassifyAt), transport errors and local refusals (Local).
//
// The zero value holds no secret; the package-level ClassifyAt and Local use it, for outcomes
// that concern no endpoint. A Secrets is a value, safe to copy and to use concurrently.
type Secrets struct {
	endpoint string
}

// SecretsOf returns the secrets of endpoint, which need not parse as a URL (the parts are cut
// by hand, so that an endpoint refused as malformed is still kept out of its own outcome).
func SecretsOf(endpoint string) Secrets { return Secrets{endpoint: endpoint} }

// Redact returns text with every secret replaced by Redacted, longest first (so the whole
// endpoint becomes one marker, not a host followed by markers), and the rest of the words kept.
func (s Secrets) Redact(text string) string {
	if text == "" || s.endpoint == "" {
		return text
	}
	for _, secret := range s.list() {
		text = strings.ReplaceAll(text, secret, Redacted)
	}
	return text
}

// list is the secrets, longest first, without repeats. It is made when a detail is redacted,
// not when the Secrets are: most sends are accepted with nothing to redact.
func (s Secrets) list() []string {
	ep := s.endpoint
	out := []string{ep}
	add := func(v string) {
		if len(v) >= minSecret {
			out = append(out, v)
		}
		if d, err := url.PathUnescape(v); err == nil && d != v && len(d) >= minSecret {
			out = append(out, d)
		}
	}
	rest := ep // after the scheme and authority: the path, query and fragment
	if i := strings.Index(ep, "://"); i >= 0 {
		rest = ep[i+len("://"):]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			rest = rest[j:]
		} else {
			rest = ""
		}
	}
	add(rest)
	beforeFragment, fragment, _ := strings.Cut(rest, "#")
	path, query, _ := strings.Cut(beforeFragment, "?")
	add(beforeFragment)
	add(path)
	add(query)
	add(fragment)
	for seg := range strings.SplitSeq(path, "/") {
		add(seg)
	}
	for pair := range strings.SplitSeq(query, "&") {
		_, v, _ := strings.Cut(pair, "=")
		add(v)
		if d, err := url.QueryUnescape(v); err == nil && d != v && len(d) >= minSecret {
			out = append(out, d) // '+' as a space: what a service that decodes the query echoes
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	out = slices.Compact(out)
	if len(out) > maxSecrets {
		out = out[:maxSecrets]
	}
	return out
}

// ClassifyAt is the package's ClassifyAt for an answer to a request to the endpoint of s: the
// detail holds none of its secrets.
func (s Secrets) ClassifyAt(now time.Time, provider string, status int, header http.Header, body []byte) Outcome {
	return classify(now, provider, status, header, body, s)
}

// Local is the package's Local for an outcome of a send to the endpoint of s: the detail holds
// none of its secrets.
func (s Secrets) Local(provider string, code Code, detail string) Outcome {
	return local(provider, code, detail, s)
}
