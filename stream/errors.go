package stream

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Redis answers a command with an error whose first word is its code. go-redis passes that text
// on as the error, and this package wraps it with %w, so callers classify errors with these
// functions instead of matching strings.

// refusedCodes are the errors of a Redis that will not let this client in however often it
// asks: WRONGPASS (a wrong user or password), NOAUTH (no password where one is needed), NOPERM
// (an ACL that does not allow a command the gateway needs).
var refusedCodes = []string{"WRONGPASS", "NOAUTH", "NOPERM"}

// errShortReply is a merged script call whose reply does not hold one result per item.
var errShortReply = errors.New("stream: batch script: a reply short of its items")

// writeRefusedCodes are the errors of a Redis that is up but refuses writes for now: OOM (used
// memory over maxmemory with a policy that evicts nothing), MISCONF (a failed RDB save with
// stop-writes-on-bgsave-error), READONLY (a replica, for example a master demoted by a
// failover the client has not followed yet), NOREPLICAS (min-replicas-to-write not met).
var writeRefusedCodes = []string{"OOM", "MISCONF", "READONLY", "NOREPLICAS"}

// Refused reports whether err says that Redis refuses this client's credentials or
// permissions: no retry can cure it.
func Refused(err error) bool { return hasCode(err, refusedCodes) }

// WriteRefused reports whether err says that Redis refuses writes for now (see
// writeRefusedCodes); it accepts them again once the cause is gone.
func WriteRefused(err error) bool { return hasCode(err, writeRefusedCodes) }

// hasCode reports whether err, or an error it wraps, starts with one of codes as a word. A
// script's error carries the code of the command that failed inside it.
func hasCode(err error, codes []string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		msg := err.Error()
		for _, c := range codes {
			if strings.HasPrefix(msg, c+" ") || msg == c {
				return true
			}
		}
	}
	return false
}

// Unreachable reports whether err says that Redis could not be asked at all: no connection, a
// timeout, a closed pool; not an answer of Redis's (those are redis.Error), nor this process's
// own cancellation.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, redis.Nil) || WriteRefused(err) || Refused(err) {
		return false
	}
	var reply redis.Error
	return !errors.As(err, &reply)
}
