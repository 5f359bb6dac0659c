// Package testkit is what tests of several packages share and no product code uses: a stepped
// clock, a buffer that goroutines may write at once, fresh P-256 keys in the encodings keys are
// written in, a wait on a channel with a deadline, a log of the breaker changes a worker
// reports, registry pieces (a breaker that opens within seconds, every simulated provider),
// the output files of the processes a test starts, a command's main run in-process, the
// example blocks of the Markdown docs, and the replay of webpush-go's per-message VAPID header
// that benchmarks compare against. Each helper fails the test with a message that says what
// went wrong; none skips.
package testkit
