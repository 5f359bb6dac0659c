// Package taxonomy turns a push service's answer into one of a small set of outcome codes, so
// that nothing else in the gateway ever compares HTTP status codes or parses a provider's error
// body.
//
// The dispatcher acts on the code alone: ACCEPTED is done, GONE and KEY_MISMATCH go to the gone
// stream, the retryable codes (RATE_LIMITED, PROVIDER_DOWN, TRANSPORT_ERROR, CIRCUIT_OPEN) go back
// to the delayed set, everything else is terminal. Beside the code, every [Outcome] keeps the
// provider's own words as a short raw detail (FCM's body line, Autopush's errno and message,
// Apple's reason, WNS's X-WNS-Status and X-WNS-Error-Description) so an operator can see why
// without a packet capture.
//
// # How an answer is classified
//
// [ClassifyAt] applies the rules every push service shares first, then the table of the service
// that answered (the provider kinds "fcm", "autopush", "apple", "wns"; any other provider id,
// such as the registry's "fallback", uses the "generic" table):
//
//   - any 2xx is ACCEPTED (Autopush has answered 200, 201 and 202);
//   - 429 is RATE_LIMITED and any 5xx is PROVIDER_DOWN, whatever the body says, because both
//     describe the service's state, not the message's;
//   - a 1xx or 3xx final answer is INVALID_REQUEST, not retryable: the gateway never follows
//     redirects, and a push service that sends one will send it again;
//   - a status outside 100..599 is handled like a 5xx (RFC 9110 section 15) and is PROVIDER_DOWN;
//   - a 4xx is looked up in the service's table: first what the body or headers name (an
//     Autopush errno, an Apple reason, an FCM phrase or FCM HTTP v1 error code, a WNS error
//     description), then what the status means for that service, and INVALID_REQUEST for a 4xx
//     nobody documents. A 4xx is a healthy round trip with a bad outcome, so the only retryable
//     code a 4xx can yield is RATE_LIMITED (WNS throttles with 406).
//
// The tables are data: each provider's vocabulary is a list of documented constants that carry
// the HTTP status they come with, their meaning and their source, and the tests walk every row
// through the fixtures in test/fixtures and every status code from 100 to 599 for every table.
//
// A Retry-After header is kept on any status that carries it (delta-seconds or any HTTP date
// form), capped at 24 hours; see [ParseRetryAfter].
//
// The detail is cut to 256 bytes of valid UTF-8 with control characters collapsed, and any URL
// in it is cut back to its scheme and host: push services echo endpoints in error text, and an
// endpoint is a credential. Outcomes made through the [Secrets] of an endpoint (the adapter
// makes all of its own that way) also have the endpoint, its path and its long path segments
// and query values replaced by [Redacted] wherever they appear, scheme or not, before the cut.
package taxonomy
