// Package redistest starts real redis-server processes for tests: each on a free loopback
// port, with its own temporary directory, AOF on and fsynced on every write, so that a test can
// SIGKILL the server, start it again on the same port and directory, and see exactly what a
// production Redis with appendfsync always would have kept.
//
// Tests never skip when redis-server is missing: Start fails the test with a message that says
// how to install it, because a silently skipped storage test is a storage test that never ran.
package redistest
