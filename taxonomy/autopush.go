package taxonomy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Mozilla Autopush (updates.push.services.mozilla.com) answers errors with a JSON body
// {"code", "errno", "error", "message", "more_info"}. The errno values below, with the status
// each comes with and its meaning, are from autopush-rs: autoendpoint/src/error.rs
// (ApiErrorKind::errno and ::status) and docs/src/errors.md, corrected by what the service was
// seen to send (docs/providers.md: 104 is payload-too-large, TTL errors are 111/112/114).
const (
	// 400: a body was sent without the crypto key elements its Content-Encoding requires.
	errnoMissingCryptoKeys = 101
	// 404: the endpoint token does not decrypt (a corrupt or forged URL) or names an unknown
	// API version. The URL must not be used again.
	errnoInvalidToken = 102
	// 410: no such user: the browser has not connected for 60 days and its record expired.
	errnoExpiredUser = 103
	// 413: the body is over the limit: 4096 bytes, or for a subscription bridged to a mobile
	// push service the bridge's data limit after base64 ("Converted buffer is too long by N
	// bytes", autopush-rs RouterError::TooMuchData; "limited to 3070 bytes" in older releases
	// [issue: webpush-go#23]).
	errnoPayloadTooLarge = 104
	// 410: the endpoint became unavailable during the request (the user unsubscribed).
	errnoUnsubscribed = 105
	// 410: no such subscription (channel) for this user, or a bridged user with no bridge
	// token or app id left. The same errno comes with 400 when the bridge has no credentials for
	// the app id the subscription names (autopush-rs FcmError::InvalidAppId): a fault of the
	// bridge's configuration, which autopush-rs reports to its own error tracker, not a dead
	// subscription; see autopushOutcome.
	errnoNoSubscription = 106
	// 400: the router type in the URL is invalid (URL corruption or an unsupported bridge).
	errnoInvalidRouter = 108
	// 401: VAPID or authentication failed. With the message "VAPID public key mismatch" it
	// means the subscription was made with another key (see autopushKeyMismatch).
	errnoAuthentication = 109
	// 400: invalid crypto key elements or an unknown Content-Encoding.
	errnoInvalidEncryption = 110
	// 400: the TTL header is missing (or another required header is).
	errnoMissingTTL = 111
	// 400: the TTL header is unreadable or out of range (0..2592000).
	errnoInvalidTTL = 112
	// 400: the Topic header is invalid (over 32 characters or outside [A-Za-z0-9_-]).
	errnoInvalidTopic = 113
	// 400: the TTL header is negative.
	errnoNegativeTTL = 114
	// 503 (or 429 relayed from a bridge): back off exponentially; Retry-After: 120.
	errnoBackOff = 201
	// 503: temporary failure, an immediate retry is fine; Retry-After: 120.
	errnoRetryNow = 202
	// 502: the bridge to an upstream service is misconfigured.
	errnoBridgeConfig = 900
	// 502: the bridge failed to authenticate to its upstream service.
	errnoBridgeAuth = 901
	// 502: the bridge could not connect to its upstream service.
	errnoBridgeConnect = 902
	// 502: the bridge's request to its upstream service timed out.
	errnoBridgeTimeout = 903
	// 500: an unexpected internal error.
	errnoUnknown = 999
)

// autopushKeyMismatch is the errno 109 message Autopush gives when the JWT's key is not the
// one the subscription was created with [code: autopush-rs
// autoendpoint/src/headers/vapid.rs VapidError::KeyMismatch]. Matched case-insensitively.
const autopushKeyMismatch = "vapid public key mismatch"

// autopushErrnos is what each errno means. An errno not listed here maps by its status.
var autopushErrnos = map[int]Code{
	errnoMissingCryptoKeys: InvalidRequest,
	errnoInvalidToken:      Gone,
	errnoExpiredUser:       Gone,
	errnoPayloadTooLarge:   PayloadTooLarge,
	errnoUnsubscribed:      Gone,
	errnoNoSubscription:    Gone,
	errnoInvalidRouter:     InvalidRequest,
	errnoAuthentication:    Unauthorized,
	errnoInvalidEncryption: InvalidRequest,
	errnoMissingTTL:        InvalidTTL,
	errnoInvalidTTL:        InvalidTTL,
	errnoInvalidTopic:      InvalidRequest,
	errnoNegativeTTL:       InvalidTTL,
	errnoBackOff:           ProviderDown,
	errnoRetryNow:          ProviderDown,
	errnoBridgeConfig:      ProviderDown,
	errnoBridgeAuth:        ProviderDown,
	errnoBridgeConnect:     ProviderDown,
	errnoBridgeTimeout:     ProviderDown,
	errnoUnknown:           ProviderDown,
}

// autopushTable: the statuses are those of autopush-rs's error.rs.
var autopushTable = table{
	byStatus: map[int]Code{
		http.StatusBadRequest:            InvalidRequest,  // bad parameters (errno says which)
		http.StatusUnauthorized:          Unauthorized,    // VAPID / Authorization invalid
		http.StatusNotFound:              Gone,            // invalid endpoint URL
		http.StatusGone:                  Gone,            // endpoint no longer valid
		http.StatusRequestEntityTooLarge: PayloadTooLarge, // body over the limit
	},
	read: readAutopush,
}

// autopushError is the JSON error body of autopush-rs (ApiError's Serialize). errno is null for
// errors that have none.
type autopushError struct {
	Errno   *int   `json:"errno"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// parseAutopush decodes an Autopush error body; ok is false when body is not one.
func parseAutopush(body []byte) (e autopushError, ok bool) {
	if !isJSONObject(body) {
		return e, false
	}
	if err := json.Unmarshal(scanned(body), &e); err != nil {
		return e, false
	}
	return e, e.Errno != nil || e.Message != ""
}

// autopushOutcome returns the code an Autopush error body names, answered with status, and its
// detail, "errno N: message". An errno names GONE only on a 404 or 410: autopush-rs sends
// errno 106 with 400 for a bridge that has no credentials for the subscription's app id, and
// a subscription is pruned only on an answer that says it is dead. Such an errno names nothing,
// so the status decides (400: INVALID_REQUEST), and the detail keeps the errno and message.
func autopushOutcome(status int, e autopushError) (Code, string) {
	msg := e.Message
	if msg == "" {
		msg = e.Error
	}
	if strings.Contains(strings.ToLower(e.Message), autopushKeyMismatch) {
		return KeyMismatch, autopushDetail(e.Errno, msg)
	}
	var code Code
	if e.Errno != nil {
		code = autopushErrnos[*e.Errno]
	}
	if code == Gone && status != http.StatusNotFound && status != http.StatusGone {
		code = ""
	}
	return code, autopushDetail(e.Errno, msg)
}

func autopushDetail(errno *int, msg string) string {
	if errno == nil {
		return msg
	}
	d := "errno " + strconv.Itoa(*errno)
	if msg != "" {
		d += ": " + msg
	}
	return d
}

func readAutopush(status int, _ http.Header, body []byte) (Code, string) {
	if e, ok := parseAutopush(body); ok {
		return autopushOutcome(status, e)
	}
	// A proxy or load balancer in front of Autopush answers in its own words.
	return "", firstLine(body)
}
