//go:build !unix

package telemetry

// fileLimit is 0 where there is no RLIMIT_NOFILE: the listener's cap is then maxListenerConns.
func fileLimit() uint64 { return 0 }
