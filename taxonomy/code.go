package taxonomy

// Code is the outcome of one delivery attempt, as the dispatcher acts on it. The values are
// stable strings: they are written to the results ledger and used as metric labels.
type Code string

const (
	// Accepted: the push service took the message (any 2xx). Done.
	Accepted Code = "ACCEPTED"

	// InvalidRequest: the service refused the request as malformed (a 4xx nobody documents, an
	// Autopush errno 101/108/110/113, an Apple Bad* reason, an unexpected 1xx or 3xx), or
	// refused it for a fault of its own configuration that leaves the subscription alive (an
	// Autopush errno 106 with a 400: its bridge knows no credentials for the app id). Sending
	// it again unchanged gets the same answer.
	InvalidRequest Code = "INVALID_REQUEST"

	// Unauthorized: our own VAPID JWT or key is wrong (bad signature, aud, exp, sub, or a WNS
	// "Domain Blocked"). It concerns every message we send, so it is an alert, not a
	// subscription problem.
	Unauthorized Code = "UNAUTHORIZED"

	// KeyMismatch: this subscription was made with a different VAPID key than the one we signed
	// with. A per-subscription fact: the upstream must ask the browser to subscribe again. It
	// must neither trip a breaker nor page anyone, unlike Unauthorized.
	KeyMismatch Code = "KEY_MISMATCH"

	// Gone: the subscription is dead (404 or 410: unsubscribed, expired, invalid token), as the
	// service documents the answer. The upstream should delete it.
	Gone Code = "GONE"

	// PayloadTooLarge: the encrypted body is over the service's limit (413).
	PayloadTooLarge Code = "PAYLOAD_TOO_LARGE"

	// RateLimited: the service asked us to slow down (429, WNS 406, FCM QUOTA_EXCEEDED).
	// Retryable, after Retry-After when the service gave one.
	RateLimited Code = "RATE_LIMITED"

	// ProviderDown: the service failed (any 5xx, or a status outside 100..599). Retryable.
	ProviderDown Code = "PROVIDER_DOWN"

	// TransportError: no HTTP answer was received (DNS, connect, TLS, timeout, reset). Decided
	// by the caller, see Local. Retryable.
	TransportError Code = "TRANSPORT_ERROR"

	// ProxyError: the egress proxy failed to open a tunnel to the push service (the proxy
	// refused the connection or timed out, answered CONNECT with 407 or any other non-2xx, or
	// failed its own TLS). Decided by the caller. Nothing reached the push service, so it says
	// nothing about the provider: it counts against the proxy's breaker, and the retry spends
	// no attempt. Retryable.
	ProxyError Code = "PROXY_ERROR"

	// CircuitOpen: the provider's or host's breaker refused the attempt before any request was
	// sent. Decided by the caller. Retryable.
	CircuitOpen Code = "CIRCUIT_OPEN"

	// InvalidTTL: the service refused the TTL header (Autopush errno 111/112/114, Apple BadTtl,
	// a WNS 400 naming the TTL).
	InvalidTTL Code = "INVALID_TTL"

	// Expired: the job's TTL ran out while it was queued, so it was not sent. Decided by the
	// caller.
	Expired Code = "EXPIRED"

	// InvalidJob: the job itself is unusable (bad JSON, missing fields, bad keys). Decided by the
	// caller; nothing was sent.
	InvalidJob Code = "INVALID_JOB"

	// Blocked: the endpoint was refused before connecting (not https, a private or metadata
	// address). Decided by the caller; nothing was sent.
	Blocked Code = "BLOCKED"

	// Canceled: an operator cancelled the job before any worker read it (gateway-worker cancel,
	// stream/inspect.Inspector.Cancel); nothing was sent. Decided by the gateway, never by a service.
	Canceled Code = "CANCELED"
)

// codes lists every Code in the order of the contract; Codes returns a copy.
var codes = [...]Code{
	Accepted, InvalidRequest, Unauthorized, KeyMismatch, Gone, PayloadTooLarge, RateLimited,
	ProviderDown, TransportError, CircuitOpen, InvalidTTL, Expired, InvalidJob, Blocked, ProxyError,
	Canceled,
}

// Codes returns every defined code, in a fixed order. The slice is the caller's to keep.
func Codes() []Code {
	return append([]Code(nil), codes[:]...)
}

// Valid reports whether c is one of the defined codes.
func (c Code) Valid() bool {
	for _, k := range codes {
		if c == k {
			return true
		}
	}
	return false
}

// Retryable reports whether a job with this outcome should be tried again later: the service
// or the path to it is in trouble, not the message. Everything else is final for the job.
func (c Code) Retryable() bool {
	switch c {
	case RateLimited, ProviderDown, TransportError, CircuitOpen, ProxyError:
		return true
	}
	return false
}
