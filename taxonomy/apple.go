package taxonomy

import (
	"encoding/json"
	"net/http"
)

// Apple Web Push (web.push.apple.com) answers errors with a JSON body {"reason": "..."}. The
// reasons, with the status each comes with and its meaning, are Apple's table for web push
// ("Sending web push notifications in web apps and browsers", as quoted in docs/providers.md), with
// what senders observed [issue: web-push#947 for BadJwtToken].
const (
	// 400: the TTL header is missing or invalid.
	appleBadTTL = "BadTtl"
	// 400: the Urgency header is not very-low, low, normal or high.
	appleBadUrgency = "BadUrgency"
	// 400: the request is malformed in some other way.
	appleBadWebPushRequest = "BadWebPushRequest"
	// 400: the Authorization header is missing or not "vapid t=..., k=...".
	appleBadAuthorizationHeader = "BadAuthorizationHeader"
	// 400: the Topic header is invalid; Apple also refuses a topic whose length is one more than
	// a multiple of 4.
	appleBadWebPushTopic = "BadWebPushTopic"
	// 400: the VAPID key's hash does not match the one the subscription was made with.
	appleVapidPkHashMismatch = "VapidPkHashMismatch"
	// 400 or 403: the k= public key is not a valid P-256 point.
	appleBadVapidPublicKey = "BadVapidPublicKey"
	// 403: the JWT is missing, signed by the wrong key, or has a bad claim: sub not a real
	// mailto: or https: URL (@localhost, .local, spaces, mailto:mailto: are refused), aud not
	// the origin, exp over a day ahead.
	appleBadJwtToken = "BadJwtToken"
	// 404: the URL path is not a subscription.
	appleBadPath = "BadPath"
	// 413: the body is over 4 KB.
	applePayloadTooLarge = "PayloadTooLarge"
	// 429: too many messages to one device.
	appleTooManyRequests = "TooManyRequests"
	// 500: an internal error.
	appleInternalServerError = "InternalServerError"
	// 503: the service is unavailable.
	appleServiceUnavailable = "ServiceUnavailable"
	// 503: the server is shutting down.
	appleShutdown = "Shutdown"
)

// appleReasons is what each reason means. A 410 comes with various reasons (Unregistered,
// ExpiredSubscription ...) that all mean the subscription expired: its status says so.
var appleReasons = map[string]Code{
	appleBadTTL:                 InvalidTTL,
	appleBadUrgency:             InvalidRequest,
	appleBadWebPushRequest:      InvalidRequest,
	appleBadAuthorizationHeader: InvalidRequest,
	appleBadWebPushTopic:        InvalidRequest,
	appleVapidPkHashMismatch:    KeyMismatch,
	appleBadVapidPublicKey:      Unauthorized,
	appleBadJwtToken:            Unauthorized,
	appleBadPath:                Gone,
	applePayloadTooLarge:        PayloadTooLarge,
	appleTooManyRequests:        RateLimited,
	appleInternalServerError:    ProviderDown,
	appleServiceUnavailable:     ProviderDown,
	appleShutdown:               ProviderDown,
}

var appleTable = table{
	byStatus: map[int]Code{
		http.StatusBadRequest:            InvalidRequest,  // malformed request
		http.StatusForbidden:             Unauthorized,    // JWT or key refused
		http.StatusNotFound:              Gone,            // bad path
		http.StatusGone:                  Gone,            // subscription expired
		http.StatusRequestEntityTooLarge: PayloadTooLarge, // over 4 KB
	},
	read: readApple,
}

func readApple(_ int, _ http.Header, body []byte) (Code, string) {
	if isJSONObject(body) {
		var v struct {
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(scanned(body), &v); err == nil && v.Reason != "" {
			return appleReasons[v.Reason], v.Reason
		}
	}
	return "", firstLine(body)
}
