package cli

import (
	"strconv"
	"strings"
)

// Dash is how a table prints text read from Redis: "-" for none, and a text that holds
// anything but printable characters (a newline, an escape sequence, invalid UTF-8: written by
// something other than the gateway's commands, which refuse them) quoted with it escaped, so it
// cannot forge a row or drive the terminal.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}

// Printable is Dash for a value printed among other words (a job id in "replayed ENTRY (job
// ID)"): one with a space or a tab is quoted too, so where it ends is never in doubt.
func Printable(s string) string {
	if s == "" {
		return "-"
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s || strings.ContainsAny(s, " \t") {
		return q
	}
	return s
}
