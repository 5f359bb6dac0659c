package pushsim

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// reason is why pushsim refuses a push; each provider answers each reason in its own shape.
type reason int

const (
	reasonMethod        reason = iota // not POST
	reasonNotFound                    // no subscription at this URL (byte for byte)
	reasonGone                        // the subscription was expired with Expire
	reasonAuthMissing                 // no Authorization header
	reasonAuthMalformed               // not "vapid t=..., k=...": legacy WebPush scheme, Crypto-Key p256ecdsa, junk
	reasonBadKey                      // k is not an uncompressed P-256 point
	reasonBadJWT                      // JWT malformed, not ES256, or its signature does not verify against k
	reasonKeyMismatch                 // k is not the key the subscription was made with
	reasonAud                         // aud is not the origin the push was served on
	reasonExpired                     // exp missing or in the past
	reasonExpTooFar                   // exp more than 24 h ahead
	reasonBadSub                      // Apple: sub not a real mailto:/https: URL
	reasonTTLMissing                  // no TTL header
	reasonTTLInvalid                  // TTL not digits
	reasonTTLNegative                 // TTL a negative number
	reasonTTLNoCache                  // WNS: TTL 0 without X-WNS-Cache-Policy: no-cache
	reasonUrgency                     // Urgency not very-low|low|normal|high
	reasonTopic                       // Topic over 32 chars or outside base64url (Apple: also length%4==1)
	reasonEncoding                    // a body without Content-Encoding: aes128gcm
	reasonTooLarge                    // body over 4096 bytes (WNS: 5000)
	reasonDecrypt                     // body is not one aes128gcm record for this subscription's keys
	numReasons
)

// shape names how a provider answers one reason: a fixture, or, where the fixtures hold no row for
// it (FCM's header complaints, a bare 405), a plain answer with the code the classifier derives
// from its status.
type shape struct {
	fixture string
	status  int
	body    string
	code    string
}

func fix(name string) shape { return shape{fixture: name} }

func plain(status int, body, code string) shape { return shape{status: status, body: body, code: code} }

// FCM's web push endpoints answer header complaints with a 400 and a short text line; the
// fixtures only hold the lines docs/providers.md quotes, so these few are written here.
func fcmBadRequest(line string) shape {
	return plain(http.StatusBadRequest, line+"\n", "INVALID_REQUEST")
}

// shapeTable is the answer every provider gives for every reason. Where docs/providers.md lists a row,
// the fixture for that row is used; the choices for reasons a service folds into one error
// (Autopush answers every VAPID problem with errno 109) follow the service.
var shapeTable = map[string][numReasons]shape{
	FCM: {
		reasonMethod:        plain(http.StatusMethodNotAllowed, "Method Not Allowed\n", "INVALID_REQUEST"),
		reasonNotFound:      fix("invalid-endpoint"),
		reasonGone:          fix("unsubscribed"),
		reasonAuthMissing:   fix("unauthorized-registration"),
		reasonAuthMalformed: fix("unauthorized-registration"),
		reasonBadKey:        fix("unauthorized-registration"),
		reasonBadJWT:        fix("unauthorized-registration"),
		reasonKeyMismatch:   fix("key-mismatch"),
		reasonAud:           fix("aud-mismatch"),
		reasonExpired:       fix("unauthorized-registration"),
		reasonExpTooFar:     fix("exp-too-far"),
		reasonBadSub:        fix("unauthorized-registration"),
		reasonTTLMissing:    fcmBadRequest("TTL header is required"),
		reasonTTLInvalid:    fcmBadRequest("TTL header must be a non-negative integer"),
		reasonTTLNegative:   fcmBadRequest("TTL header must be a non-negative integer"),
		reasonTTLNoCache:    fcmBadRequest("TTL header must be a non-negative integer"),
		reasonUrgency:       fcmBadRequest("Urgency header must be one of very-low, low, normal, high"),
		reasonTopic:         fcmBadRequest("Topic header must be at most 32 URL-safe base64 characters"),
		reasonEncoding:      fcmBadRequest("Content-Encoding must be aes128gcm"),
		reasonTooLarge:      fix("payload-too-large"),
		reasonDecrypt:       fcmBadRequest("payload is not a valid aes128gcm record"),
	},
	Autopush: {
		reasonMethod:        plain(http.StatusMethodNotAllowed, "", "INVALID_REQUEST"),
		reasonNotFound:      fix("errno-102"),
		reasonGone:          fix("errno-105"),
		reasonAuthMissing:   fix("errno-109"),
		reasonAuthMalformed: fix("errno-109"),
		reasonBadKey:        fix("errno-109"),
		reasonBadJWT:        fix("errno-109"),
		reasonKeyMismatch:   fix("errno-109-key-mismatch"),
		reasonAud:           fix("errno-109"),
		reasonExpired:       fix("errno-109"),
		reasonExpTooFar:     fix("errno-109"),
		reasonBadSub:        fix("errno-109"),
		reasonTTLMissing:    fix("errno-111"),
		reasonTTLInvalid:    fix("errno-112"),
		reasonTTLNegative:   fix("errno-114"),
		reasonTTLNoCache:    fix("errno-112"),
		reasonUrgency:       fix("unknown-errno-400"), // autopush-rs has no errno for Urgency
		reasonTopic:         fix("errno-113"),
		reasonEncoding:      fix("errno-110"),
		reasonTooLarge:      fix("errno-104"),
		reasonDecrypt:       fix("errno-110"),
	},
	Apple: {
		reasonMethod:        plain(http.StatusMethodNotAllowed, `{"reason": "MethodNotAllowed"}`, "INVALID_REQUEST"),
		reasonNotFound:      fix("bad-path"),
		reasonGone:          fix("unregistered"),
		reasonAuthMissing:   fix("bad-jwt-token"),
		reasonAuthMalformed: fix("bad-authorization-header"),
		reasonBadKey:        fix("bad-vapid-public-key-400"),
		reasonBadJWT:        fix("bad-jwt-token"),
		reasonKeyMismatch:   fix("vapid-pk-hash-mismatch"),
		reasonAud:           fix("bad-jwt-token"),
		reasonExpired:       fix("bad-jwt-token"),
		reasonExpTooFar:     fix("bad-jwt-token"),
		reasonBadSub:        fix("bad-jwt-token"),
		reasonTTLMissing:    fix("bad-ttl"),
		reasonTTLInvalid:    fix("bad-ttl"),
		reasonTTLNegative:   fix("bad-ttl"),
		reasonTTLNoCache:    fix("bad-ttl"),
		reasonUrgency:       fix("bad-urgency"),
		reasonTopic:         fix("bad-web-push-topic"),
		reasonEncoding:      fix("bad-web-push-request"),
		reasonTooLarge:      fix("payload-too-large"),
		reasonDecrypt:       fix("bad-web-push-request"),
	},
	WNS: {
		reasonMethod:        fix("method-not-allowed"),
		reasonNotFound:      fix("not-found"),
		reasonGone:          fix("expired"),
		reasonAuthMissing:   fix("unauthorized"),
		reasonAuthMalformed: fix("unauthorized"),
		reasonBadKey:        fix("unauthorized"),
		reasonBadJWT:        fix("unauthorized"),
		reasonKeyMismatch:   fix("forbidden"),
		reasonAud:           fix("unauthorized"),
		reasonExpired:       fix("unauthorized"),
		reasonExpTooFar:     fix("unauthorized"),
		reasonBadSub:        fix("unauthorized"),
		reasonTTLMissing:    fix("bad-ttl"),
		reasonTTLInvalid:    fix("bad-ttl"),
		reasonTTLNegative:   fix("bad-ttl"),
		reasonTTLNoCache:    fix("bad-ttl"),
		reasonUrgency:       fix("bad-request"),
		reasonTopic:         fix("bad-request"),
		reasonEncoding:      fix("bad-request"),
		reasonTooLarge:      fix("payload-too-large"),
		reasonDecrypt:       fix("bad-request"),
	},
	Generic: {
		reasonMethod:        plain(http.StatusMethodNotAllowed, "", "INVALID_REQUEST"),
		reasonNotFound:      fix("not-found"),
		reasonGone:          fix("gone"),
		reasonAuthMissing:   fix("unauthorized"),
		reasonAuthMalformed: fix("unauthorized"),
		reasonBadKey:        fix("unauthorized"),
		reasonBadJWT:        fix("unauthorized"),
		reasonKeyMismatch:   fix("forbidden"), // no generic key-mismatch row: a 403 is all RFC 8292 gives
		reasonAud:           fix("unauthorized"),
		reasonExpired:       fix("unauthorized"),
		reasonExpTooFar:     fix("unauthorized"),
		reasonBadSub:        fix("unauthorized"),
		reasonTTLMissing:    fix("bad-request"),
		reasonTTLInvalid:    fix("bad-request"),
		reasonTTLNegative:   fix("bad-request"),
		reasonTTLNoCache:    fix("bad-request"),
		reasonUrgency:       fix("bad-request"),
		reasonTopic:         fix("bad-request"),
		reasonEncoding:      fix("bad-request"),
		reasonTooLarge:      fix("payload-too-large"),
		reasonDecrypt:       fix("bad-request"),
	},
}

// acceptedFixture is each provider's success answer; per-message ids are filled in per push.
var acceptedFixture = map[string]string{
	FCM:      "accepted",
	Autopush: "accepted-201",
	Apple:    "accepted",
	WNS:      "accepted",
	Generic:  "accepted-201",
}

// failFixture is the answer a Fail fault gives for a status, per provider.
var failFixture = map[string]map[int]string{
	FCM:      {500: "internal", 503: "unavailable"},
	Autopush: {500: "errno-999", 502: "errno-900", 503: "errno-201"},
	Apple:    {500: "internal-server-error", 503: "service-unavailable"},
	WNS:      {500: "internal", 503: "unavailable"},
	Generic:  {500: "internal", 502: "bad-gateway", 503: "unavailable"},
}

// throttleFixture is how each provider says "slow down". Autopush has no 429 path: it answers
// 503 errno 201 with Retry-After; WNS throttles with 406.
var throttleFixture = map[string]string{
	FCM:      "throttled",
	Autopush: "errno-201",
	Apple:    "too-many-requests",
	WNS:      "throttled",
	Generic:  "throttled-date", // its HTTP-date Retry-After is replaced by seconds
}

// answer is one HTTP answer ready to write, and the code the classifier gives it.
type answer struct {
	status int
	header http.Header // canonical keys; shared: clone before changing
	body   []byte
	code   string
	name   string // "autopush/errno-110", or "plain" for the few answers no fixture holds
}

// withHeader returns a copy of a whose header has k set to v.
func (a answer) withHeader(k, v string) answer {
	a.header = a.header.Clone()
	a.header.Set(k, v)
	return a
}

func fromFixture(f fixtures.Fixture) answer {
	return answer{status: f.Status, header: f.Header(), body: []byte(f.Body), code: f.Want.Code, name: f.Provider + "/" + f.Name}
}

func fromShape(provider string, s shape) answer {
	if s.fixture != "" {
		return fromFixture(fixtures.MustGet(provider, s.fixture))
	}
	h := http.Header{}
	if s.body != "" {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		if provider == Apple {
			h.Set("Content-Type", "application/json")
		}
	}
	return answer{status: s.status, header: h, body: []byte(s.body), code: s.code, name: "plain"}
}

// answers is shapeTable resolved against the fixtures once, at start-up: a missing fixture is a
// build defect and panics in every test.
var answers = func() map[string][numReasons]answer {
	m := make(map[string][numReasons]answer, len(shapeTable))
	for p, row := range shapeTable {
		var out [numReasons]answer
		for r, s := range row {
			if s.fixture == "" && s.status == 0 {
				panic(fmt.Sprintf("pushsim: provider %s has no answer for reason %d", p, r))
			}
			out[r] = fromShape(p, s)
		}
		m[p] = out
	}
	return m
}()

func refusal(provider string, r reason) answer { return answers[provider][r] }

// statusAnswer is what a Fail fault with this status looks like at provider: the listed fixture,
// else any fixture of that provider with that status, else a plain answer.
func statusAnswer(provider string, status int) answer {
	if name, ok := failFixture[provider][status]; ok {
		return fromFixture(fixtures.MustGet(provider, name))
	}
	for _, f := range fixtures.All() {
		if f.Provider == provider && f.Status == status {
			return fromFixture(f)
		}
	}
	return fromShape(provider, plain(status, http.StatusText(status)+"\n", plainCode(status)))
}

// plainCode is the RFC 8030 meaning of a status with no provider detail, as taxonomy's generic
// table reads it.
func plainCode(status int) string {
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		return "GONE"
	case status == http.StatusRequestEntityTooLarge:
		return "PAYLOAD_TOO_LARGE"
	case status == http.StatusTooManyRequests:
		return "RATE_LIMITED"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return "UNAUTHORIZED"
	case status >= 500:
		return "PROVIDER_DOWN"
	case status >= 200 && status < 300:
		return "ACCEPTED"
	}
	return "INVALID_REQUEST"
}

// retryAfterSeconds formats a Retry-After the way services send it: whole seconds, at least 1.
func retryAfterSeconds(secs float64) string {
	n := int64(secs)
	if float64(n) < secs {
		n++
	}
	return strconv.FormatInt(max(n, 1), 10)
}
