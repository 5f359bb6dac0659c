// Package providers holds the provider table that operators edit (registry.yaml) and answers the
// one question every other part of the gateway asks of it: which push service owns this endpoint?
//
// The table is loaded strictly. Parse walks the YAML node tree by hand instead of decoding into
// structs, so that every mistake carries the file, line and field path, every mistake in the file
// is reported at once (an operator fixing a rollout should not play whack-a-mole), and a typo such
// as "brust" is refused with a suggestion instead of silently falling back to a default.
//
// Resolve maps an endpoint URL to a Provider by the longest matching host suffix on label
// boundaries, so "wns2-par02p.notify.windows.com" belongs to the entry that lists
// "notify.windows.com" while "evilgoogleapis.com" does not belong to "googleapis.com". Endpoints
// whose host no entry lists go to the mandatory "fallback" entry, which is how self-hosted
// Autopush servers and future services get delivered to without a code change.
//
// A Registry is immutable after Parse and safe for concurrent use; Resolve allocates only what
// net/url allocates.
package providers
