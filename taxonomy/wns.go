package taxonomy

import (
	"net/http"
	"strings"
	"unicode"
)

// Microsoft WNS (*.notify.windows.com) answers with an empty body and puts what happened in
// headers [doc: windows-dev-docs push-request-response-headers].
const (
	// wnsStatusHeader: "received", "dropped" or "channelthrottled".
	wnsStatusHeader = "X-WNS-Status"
	// wnsDescriptionHeader: a human-readable reason, on errors.
	wnsDescriptionHeader = "X-WNS-Error-Description"
)

// X-WNS-Status values, and what each says about the outcome beyond the status: only a
// throttled channel adds anything (a 4xx that says channelthrottled is a rate limit, whatever
// its number).
const (
	// Any 2xx: the notification was received and processed.
	wnsReceived = "received"
	// The notification was dropped because of an error or because the client refused it.
	wnsDropped = "dropped"
	// 406: the sender is over the throttle limit for this channel.
	wnsChannelThrottled = "channelthrottled"
)

var wnsStates = map[string]Code{
	wnsReceived:         "",
	wnsDropped:          "",
	wnsChannelThrottled: RateLimited,
}

// wnsTable: what each status means at WNS.
var wnsTable = table{
	byStatus: map[int]Code{
		// 400 Bad Request: headers wrong or conflicting, e.g. TTL 0 without
		// X-WNS-Cache-Policy: no-cache [issue: pywebpush#162], or TTL missing. See wnsRules for
		// the TTL case.
		http.StatusBadRequest: InvalidRequest,
		// 401 Unauthorized: the request's authentication is invalid.
		http.StatusUnauthorized: Unauthorized,
		// 403 Forbidden: the sender is not authorized to send to this channel: it belongs to
		// another VAPID key, a per-subscription fact.
		http.StatusForbidden: KeyMismatch,
		// 404 Not Found: the channel URI is not valid or not recognised by WNS.
		http.StatusNotFound: Gone,
		// 405 Method Not Allowed: only POST is allowed.
		http.StatusMethodNotAllowed: InvalidRequest,
		// 406 Not Acceptable: throttled. WNS throttles with 406, not 429, and sends Retry-After
		// [issue: web-push-php#335].
		http.StatusNotAcceptable: RateLimited,
		// 410 Gone: the channel expired. See wnsRules for "Domain Blocked".
		http.StatusGone: Gone,
		// 413 Request Entity Too Large: the payload is over 5000 bytes.
		http.StatusRequestEntityTooLarge: PayloadTooLarge,
		// 500 Internal Server Error and 503 Service Unavailable are transient: every 5xx is
		// ProviderDown before this table is consulted.
	},
	read: readWNS,
}

// wnsRules refine a status by its X-WNS-Error-Description: a rule applies on its status when
// the description contains its words (case-insensitive, whole words, punctuation ignored).
var wnsRules = []struct {
	status int
	words  string // lower case words separated by one space
	code   Code
}{
	// 400 naming the TTL ("Invalid TTL header", TTL 0 without the no-cache policy).
	{http.StatusBadRequest, "ttl", InvalidTTL},
	{http.StatusBadRequest, "time to live", InvalidTTL},
	// 410 "Domain Blocked": WNS refuses our sending domain. That is about us, not the
	// subscription, so it must not prune subscriptions: treat it like a credential problem.
	{http.StatusGone, "domain blocked", Unauthorized},
}

func readWNS(status int, h http.Header, body []byte) (Code, string) {
	state := strings.TrimSpace(h.Get(wnsStatusHeader))
	desc := strings.TrimSpace(h.Get(wnsDescriptionHeader))

	detail := note(state, desc)
	if state == "" && desc == "" {
		detail = firstLine(body)
	}

	if desc != "" {
		words := " " + wordsOf(desc) + " "
		for _, r := range wnsRules {
			if r.status == status && strings.Contains(words, " "+r.words+" ") {
				return r.code, detail
			}
		}
	}
	return wnsStates[strings.ToLower(state)], detail
}

// wordsOf lower-cases s and reduces it to its letters and digits, one space between words:
// "X-WNS-TTL: bad" reads "x wns ttl bad", and "throttle" never reads as "ttl".
func wordsOf(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
