// Package vapid identifies the gateway to push services with VAPID (RFC 8292).
//
// A push service only delivers a message when its Authorization header carries
// an ES256 JWT, signed with the application server key the browser subscribed
// with, that names the push service's origin (aud), expires within a day (exp)
// and gives a contact (sub):
//
//	Authorization: vapid t=<jwt>, k=<base64url uncompressed public key>
//
// The package has three parts:
//
//   - Key: loads and generates P-256 keys in the formats operators already
//     have (PEM, or the raw base64url private key that web-push and
//     webpush-go print) and never prints its private half.
//   - The subject check (NewSigner's) and Audience: the checks push services
//     apply to sub and aud, done here so a bad value fails at start-up or per
//     message with a clear reason instead of a bare 403 BadJwtToken from Apple.
//   - Signer: signs tokens and caches them per (key, audience). One ES256
//     signature costs tens of microseconds and Apple asks senders not to
//     refresh a token more than once an hour, so a token is reused until
//     RefreshBefore its expiry and concurrent misses sign only once.
package vapid

import (
	"errors"
	"time"
)

// Errors returned by this package; match them with errors.Is. The wrapped
// messages say which rule failed; they never contain key material or an
// endpoint path.
var (
	// ErrBadKey: the key cannot be parsed, is not ECDSA P-256, or is nil.
	ErrBadKey = errors.New("vapid: bad key")
	// ErrBadSubject: sub is not a real mailto: address or https: URL.
	ErrBadSubject = errors.New("vapid: bad subject")
	// ErrBadLifetime: a token lifetime is not in (0, MaxLifetime].
	ErrBadLifetime = errors.New("vapid: bad lifetime")
	// ErrBadAudience: the endpoint or audience is not an https origin.
	ErrBadAudience = errors.New("vapid: bad audience")
)

const (
	// DefaultLifetime is how far ahead exp is set when no lifetime is given.
	// Not the 24 h maximum: a sender whose clock runs ahead of the push
	// service's would produce tokens that are refused (pywebpush#74).
	DefaultLifetime = 12 * time.Hour
	// MaxLifetime is the longest exp RFC 8292 allows push services to accept.
	MaxLifetime = 24 * time.Hour
	// RefreshBefore is how long before exp a cached token is replaced, so a
	// token is never sent so close to expiry that a slow request or a skewed
	// clock makes the push service see it expired.
	RefreshBefore = 15 * time.Minute
)
