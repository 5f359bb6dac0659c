package taxonomy

import "net/http"

// genericTable is for every push service we have no table for: self-hosted Autopush, Chromium
// forks, services yet to come. It knows the meanings of RFC 8030 and RFC 8292, reads an
// Autopush-style JSON body when there is one (self-hosted Autopush is the common case), and
// otherwise keeps the body itself as the detail.
var genericTable = table{
	byStatus: map[int]Code{
		// 400: the request is malformed (RFC 8030 section 5.2 uses it for a missing TTL; a
		// generic body is not read for which header was wrong).
		http.StatusBadRequest: InvalidRequest,
		// 401: the VAPID authentication is missing or invalid (RFC 8292 section 4).
		http.StatusUnauthorized: Unauthorized,
		// 403: the push service refused our credentials (RFC 8292 section 4.2 uses it for a
		// key that does not match a restricted subscription, but without a service-specific
		// reason it cannot be told from a bad JWT, and a false "resubscribe" is worse than an
		// alert).
		http.StatusForbidden: Unauthorized,
		// 404: the subscription expired (RFC 8030 section 7.3).
		http.StatusNotFound: Gone,
		// 410: the subscription is gone (what every known service sends).
		http.StatusGone: Gone,
		// 413: the body is over the service's limit (RFC 8030 section 7.2).
		http.StatusRequestEntityTooLarge: PayloadTooLarge,
	},
	read: readGeneric,
}

func readGeneric(status int, _ http.Header, body []byte) (Code, string) {
	if e, ok := parseAutopush(body); ok && e.Errno != nil {
		return autopushOutcome(status, e)
	}
	// The whole body, not its first line: an unknown service's words are all we have.
	if len(body) > maxRawDetail {
		body = body[:maxRawDetail]
	}
	return "", string(plainText(body))
}
