package taxonomy

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// Google FCM's web push endpoints (fcm.googleapis.com/fcm/send/, /wp/) answer errors with a
// short plain-text line, or an HTML page for UnauthorizedRegistration. These are the phrases
// seen, matched case-insensitively anywhere in the body; the first match wins, so the most
// specific comes first. Sources as in docs/providers.md.
var fcmPhrases = []struct {
	phrase []byte // lower case
	code   Code
}{
	// 403 "the VAPID credentials in the authorization header do not correspond to the
	// credentials used to create the subscriptions.": the subscription was made with another
	// applicationServerKey [issue: webpush-java#212].
	{[]byte("do not correspond to the credentials"), KeyMismatch},
	// 400 HTML page titled UnauthorizedRegistration: a bad VAPID Authorization header, or a
	// subscription made before VAPID (with a GCM sender id) [issue: web-push#237].
	{[]byte("unauthorizedregistration"), Unauthorized},
	// 403 "aud claim in the token MUST include the origin of the push resource URL": the JWT's
	// aud is not the endpoint's origin [issue: pywebpush#118].
	{[]byte("aud claim"), Unauthorized},
	// 403 "exp claim must not more than 24 hours from the time of the request": exp too far
	// ahead, or our clock runs ahead of Google's.
	{[]byte("exp claim"), Unauthorized},
	// 404 "A valid push subscription endpoint should be specified in the URL as such:
	// https://fcm.googleapis.com/wp/...": a bad token, or one unused for 270 days, which
	// Google says will not be valid again [issue: pushpad/web-push#14]. Since 2025 the same
	// answer also comes for /fcm/send/ subscriptions of live browsers, Opera's above all
	// [issue: web-push#940]; nothing in it tells the two apart, and it stays GONE for the
	// reasons docs/providers.md gives.
	{[]byte("valid push subscription endpoint should be specified"), Gone},
	// 410 "push subscription has unsubscribed or expired.": the user unsubscribed.
	{[]byte("push subscription has unsubscribed or expired"), Gone},
}

// FCM HTTP v1 API error codes (details[].errorCode of a google.rpc.Status error body), with
// the status FCM documents for each [doc: firebase.google.com FCM HTTP v1 ErrorCode]. Web push
// endpoints are not seen to send this shape; it is accepted so that a change on Google's side
// or a v1 proxy does not read as an unknown error.
const (
	// 400: request parameters were invalid (bad token format, payload, TTL ...).
	fcmV1InvalidArgument = "INVALID_ARGUMENT"
	// 404: the app instance was unregistered; the token is no longer valid.
	fcmV1Unregistered = "UNREGISTERED"
	// 403: the authenticated sender is not the one the token was registered for.
	fcmV1SenderIDMismatch = "SENDER_ID_MISMATCH"
	// 429: sending limit exceeded for the message target.
	fcmV1QuotaExceeded = "QUOTA_EXCEEDED"
	// 503: the server is overloaded.
	fcmV1Unavailable = "UNAVAILABLE"
	// 500: an unknown internal error.
	fcmV1Internal = "INTERNAL"
	// 401: the APNs certificate or web push auth key was invalid or missing.
	fcmV1ThirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"
)

// fcmV1ErrorCodes maps details[].errorCode; fcmV1Statuses maps error.status (google.rpc.Code
// names), consulted when no detail carries a known errorCode.
var (
	fcmV1ErrorCodes = map[string]Code{
		fcmV1InvalidArgument:     InvalidRequest,
		fcmV1Unregistered:        Gone,
		fcmV1SenderIDMismatch:    KeyMismatch,
		fcmV1QuotaExceeded:       RateLimited,
		fcmV1Unavailable:         ProviderDown,
		fcmV1Internal:            ProviderDown,
		fcmV1ThirdPartyAuthError: Unauthorized,
	}
	fcmV1Statuses = map[string]Code{
		"INVALID_ARGUMENT":   InvalidRequest, // 400
		"UNAUTHENTICATED":    Unauthorized,   // 401
		"PERMISSION_DENIED":  Unauthorized,   // 403
		"NOT_FOUND":          Gone,           // 404
		"RESOURCE_EXHAUSTED": RateLimited,    // 429
		"INTERNAL":           ProviderDown,   // 500
		"UNAVAILABLE":        ProviderDown,   // 503
	}
)

var fcmTable = table{
	byStatus: map[int]Code{
		http.StatusBadRequest:            InvalidRequest,  // malformed request
		http.StatusUnauthorized:          Unauthorized,    // missing or bad Authorization
		http.StatusForbidden:             Unauthorized,    // JWT refused (aud, exp, signature)
		http.StatusNotFound:              Gone,            // bad or long-inactive token
		http.StatusGone:                  Gone,            // unsubscribed
		http.StatusRequestEntityTooLarge: PayloadTooLarge, // body over 4096 bytes
	},
	read: readFCM,
}

// fcmV1Error is the FCM HTTP v1 error body.
type fcmV1Error struct {
	Error *struct {
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			ErrorCode string `json:"errorCode"`
		} `json:"details"`
	} `json:"error"`
}

func readFCM(_ int, _ http.Header, body []byte) (Code, string) {
	if code, detail, ok := readFCMv1(body); ok {
		return code, detail
	}
	if len(body) == 0 {
		return "", ""
	}
	lower := bytes.ToLower(scanned(body))
	for _, p := range fcmPhrases {
		if bytes.Contains(lower, p.phrase) {
			return p.code, firstLine(body)
		}
	}
	return "", firstLine(body)
}

// readFCMv1 reads an FCM HTTP v1 error body; the detail is "ERROR_CODE: message".
func readFCMv1(body []byte) (Code, string, bool) {
	if !isJSONObject(body) {
		return "", "", false
	}
	var v fcmV1Error
	if err := json.Unmarshal(scanned(body), &v); err != nil || v.Error == nil {
		return "", "", false
	}
	e := v.Error
	name, code := e.Status, fcmV1Statuses[e.Status]
	for _, d := range e.Details {
		if c, ok := fcmV1ErrorCodes[d.ErrorCode]; ok {
			name, code = d.ErrorCode, c
			break
		}
	}
	return code, note(name, e.Message), true
}
