// Package timetest is time for tests without sleeping: a clock the test sets and steps by hand,
// and a wait on a channel that fails the test after a deadline.
package timetest
