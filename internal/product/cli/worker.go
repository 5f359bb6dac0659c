package cli

import (
	"crypto/rand"
	"encoding/hex"
	"os"
)

// DefaultGOGC is the garbage collection target of `gateway-worker run` (its --gogc; run says
// why it is not Go's default). The bench's webpush-go contender runs with it too, so that the
// comparison is of the code, not of a runtime setting either could use.
const DefaultGOGC = 400

// RunStats is what `gateway-worker run --stats-file` writes when the worker stops; the bench
// reads it.
type RunStats struct {
	RedisRoundTrips int64  `json:"redis_round_trips"`
	RedisCommands   int64  `json:"redis_commands"`
	VAPIDSignatures uint64 `json:"vapid_signatures"`
}

// ConsumerName is unique per process: the pod name (or host name) and a random suffix, so a
// restarted process never inherits a dead one's pending entries by name.
func ConsumerName() string {
	base := os.Getenv("POD_NAME")
	if base == "" {
		base, _ = os.Hostname()
	}
	if base == "" {
		base = "worker"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}
