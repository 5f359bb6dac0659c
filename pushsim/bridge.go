package pushsim

import (
	"encoding/base64"

	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// Autopush delivers to Firefox for Android through a bridge: it forwards each push to FCM as
// a data message, under the app id the browser registered with. Two answers come from that
// bridge and from nowhere else, and Bridge makes a subscription one that gets them.

// BridgeAppID is the app id pushsim's Autopush bridge has credentials for; a subscription
// bridged under any other is refused as autopush-rs refuses it (FcmError::InvalidAppId).
const BridgeAppID = "org.mozilla.firefox"

// bridgeMaxData is the most data the bridge sends in one FCM message (autopush-rs FcmSettings
// max_data, default 4096 bytes), counted as autopush-rs counts it: the JSON of
// {"chid", "body", "con"} whose body is the request body in unpadded base64url.
const bridgeMaxData = 4096

// bridgeOverhead is that JSON without the base64 of the body: a channel id (a UUID) and the
// content coding aes128gcm.
var bridgeOverhead = len(`{"chid":"00000000-0000-0000-0000-000000000000","body":"","con":"aes128gcm"}`)

// The bridge's answers, read once: the fixtures record them.
var (
	bridgeInvalidApp = fromFixture(fixtures.MustGet(Autopush, "errno-106-invalid-app-id"))
	bridgeTooLarge   = fromFixture(fixtures.MustGet(Autopush, "errno-104-bridged"))
)

// Bridge makes the Autopush subscription at endpoint one that Autopush routes through its FCM
// bridge under appID, as it routes Firefox for Android's. From then on a push to it is refused
// with 400 errno 106 when appID is not BridgeAppID (a fault of the bridge's configuration: the
// subscription lives on), and with 413 errno 104 when its body does not fit the bridge's data
// limit after base64 (a body over 3015 bytes, well under the 4096 every push service takes).
// It reports whether endpoint is an Autopush subscription of this server.
func (s *Server) Bridge(endpoint, appID string) bool {
	sub, ok := s.subs.byEndpointURL(endpoint)
	if !ok || sub.provider != Autopush {
		return false
	}
	sub.bridgeApp.Store(&appID)
	return true
}

// bridgeRefusal is the bridge's answer to a push of body to sub, when it refuses one. The app
// id is checked before the size, in autopush-rs's order.
func bridgeRefusal(sub *subscription, body []byte) (answer, bool) {
	app := sub.bridgeApp.Load()
	switch {
	case app == nil:
		return answer{}, false
	case *app != BridgeAppID:
		return bridgeInvalidApp, true
	case len(body) > 0 && bridgeOverhead+base64.RawURLEncoding.EncodedLen(len(body)) > bridgeMaxData:
		return bridgeTooLarge, true
	}
	return answer{}, false
}
