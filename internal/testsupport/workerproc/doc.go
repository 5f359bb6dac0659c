// Package workerproc runs the real gateway-worker binary as child processes of a test, for the
// tests that hold the product to what it does as a process: killed, restarted, out of
// descriptors, on a Redis Cluster, driven by the examples.
//
// Main, called from a test binary's TestMain, builds ./cmd/gateway-worker of the product module
// once into a temporary directory (stamped with a version when given one, as `make build` stamps
// it), runs the tests and removes the build. Build does the same into a path of the caller's.
// Binary is the built file and Command a one-off command of it (enqueue, audit, status).
//
// Start runs a worker with its output in a new file of a proctest.Logs, optionally under an
// RLIMIT_NOFILE of its own. A Worker is waited on from the start, so Done, Wait, Kill and Stop
// can be called from any goroutine; HTTPAddr waits for the address its listener took. Stopping
// the workers a test started is the test's to do, at the point of its cleanups it chooses, with
// Stop (SIGTERM, and SIGKILL after a bound if one is given) or Kill.
package workerproc
