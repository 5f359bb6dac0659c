package timetest

import (
	"testing"
	"time"
)

// Receive returns the next value from ch, failing the test when none comes within d: what names
// the awaited event in the message.
func Receive[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	var v T
	select {
	case v = <-ch:
	case <-time.After(d):
		t.Fatalf("%s: nothing within %v", what, d)
	}
	return v
}
