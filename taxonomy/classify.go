package taxonomy

import (
	"net/http"
	"strconv"
	"time"
)

// table is one push service's vocabulary. Only 4xx answers consult it for their code: 2xx,
// 429 and 5xx mean the same at every service and are decided before (see ClassifyAt).
type table struct {
	// byStatus gives what a documented 4xx status means at this service when the body and
	// headers name nothing more specific. An undocumented 4xx is InvalidRequest.
	byStatus map[int]Code
	// read returns the code the body or headers name ("" when they name nothing this table
	// knows) and the service's raw detail, not yet cleaned.
	read func(status int, h http.Header, body []byte) (Code, string)
}

// tables maps a provider kind to its table; any other provider id reads as generic.
var tables = map[string]*table{
	"fcm":      &fcmTable,
	"autopush": &autopushTable,
	"apple":    &appleTable,
	"wns":      &wnsTable,
	"generic":  &genericTable,
}

func tableFor(provider string) *table {
	if t, ok := tables[provider]; ok {
		return t
	}
	return &genericTable
}

// ClassifyAt classifies the answer a push service gave to one request: its status, headers and
// (already size-capped) body. provider picks the table: "fcm", "autopush", "apple", "wns", and
// the generic table for anything else. now is the instant a Retry-After HTTP date is measured
// from. The rules are in the package documentation; every outcome has a valid code, Retryable
// equal to Code.Retryable, and a detail of at most 256 bytes of valid UTF-8.
//
// The detail may still quote an endpoint's path when the service echoes it without a scheme:
// the adapter classifies through Secrets.ClassifyAt, which knows the endpoint.
func ClassifyAt(now time.Time, provider string, status int, header http.Header, body []byte) Outcome {
	return classify(now, provider, status, header, body, Secrets{})
}

func classify(now time.Time, provider string, status int, header http.Header, body []byte, secrets Secrets) Outcome {
	t := tableFor(provider)
	named, detail := t.read(status, header, body)

	var code Code
	switch {
	case status < 100 || status > 599:
		// RFC 9110 section 15: a client treats an invalid status as a 5xx.
		code = ProviderDown
		detail = note("invalid HTTP status "+strconv.Itoa(status), detail)
	case status < 200:
		// net/http consumes interim 1xx answers itself; a final one is a broken service.
		code = InvalidRequest
		detail = note("unexpected informational status "+strconv.Itoa(status), detail)
	case status < 300:
		code = Accepted
	case status < 400:
		// Redirects are never followed: an endpoint is client-supplied, and following it
		// would let a subscription steer us to any host. The answer will not change.
		code = InvalidRequest
		detail = note("redirect status "+strconv.Itoa(status)+" not followed", detail)
	case status == http.StatusTooManyRequests:
		code = RateLimited
	case status >= 500:
		code = ProviderDown
	case named != "" && (!named.Retryable() || named == RateLimited):
		// A 4xx is a healthy round trip: the body may refine it, and may say "slow down", but
		// may not turn it into an outage that would count against the provider's breaker.
		code = named
	default:
		code = t.byStatus[status]
		if code == "" {
			code = InvalidRequest
		}
	}

	o := Outcome{
		Code:      code,
		Status:    status,
		Provider:  provider,
		Retryable: code.Retryable(),
		Detail:    cleanDetail(detail, secrets),
	}
	// Kept whatever the status: WNS throttles with 406 + Retry-After, Autopush sends one on
	// every 503, and a service may ask for a pause on any answer.
	if d, ok := ParseRetryAfter(header.Get("Retry-After"), now); ok {
		o.RetryAfter = d
	}
	return o
}

// note joins a prefix (our conclusion, or a provider's error name) and what follows it with
// ": ", leaving out whichever is empty.
func note(prefix, rest string) string {
	switch {
	case rest == "":
		return prefix
	case prefix == "":
		return rest
	}
	return prefix + ": " + rest
}
