package pushsim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its servers and clients: a handler, serve loop or connection goroutine
// still running at the end is a leak.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
