// Package testkit is what tests of several packages share and no product code uses: a stepped
// clock, a buffer that goroutines may write at once, fresh P-256 keys in the encodings keys are
// written in, a wait on a channel with a deadline, and a command's main run in-process. Each
// helper fails the test with a message that says what went wrong; none skips.
package testkit
