package taxonomy

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps what a service may ask for. A day is already past most jobs' TTL; beyond
// it a value is a bug on the service's side, and trusting it would park a job for weeks.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110 section 10.2.3): delta-seconds, or
// an HTTP date in any of the three forms http.ParseTime accepts (IMF-fixdate, RFC 850, asctime),
// measured from now. It returns the wait, capped at 24 hours, and whether the value was usable.
//
// Not usable: an empty value, a sign, a fraction, anything that is neither digits nor a date,
// and a date not after now (a past date asks for nothing). Delta-seconds too large to represent
// are treated as very large (RFC 9111 section 1.2.2 says so for caches) and so capped, not
// ignored: the service clearly meant "not soon".
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t") // optional whitespace around a field value
	if v == "" {
		return 0, false
	}
	if allDigits(v) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates rather than overflows for far dates
	if d <= 0 {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
