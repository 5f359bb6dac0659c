package job

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The readers of the format's values that are not plain strings: base64 bodies, whole
// numbers, times.

// decodeBase64 accepts standard and URL-safe base64, padded or not: upstreams in other
// languages produce all four, and none of them is ambiguous.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// wholeNumber reads a JSON number with an integral value (1000 and 1e3 alike).
func wholeNumber(raw string) (int64, error) {
	if kindOf(raw) != "a number" {
		return 0, fmt.Errorf("must be a whole number, got %s", kindOf(raw))
	}
	s := strings.TrimSpace(raw)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("must be a whole number, got %s", cut(s, 32))
	}
	return int64(f), nil
}

// wholeOrFraction reads a JSON number, dropping a fraction (a DOMHighResTimeStamp may have one).
func wholeOrFraction(raw string) (int64, error) {
	if kindOf(raw) != "a number" {
		return 0, fmt.Errorf("must be a number or null, got %s", kindOf(raw))
	}
	s := strings.TrimSpace(raw)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("must be a number of milliseconds, got %s", cut(s, 32))
	}
	return int64(f), nil
}

// decodeTime reads an RFC 3339 string or a number of unix milliseconds.
func decodeTime(m member) (time.Time, error) {
	raw := m.raw
	switch kindOf(raw) {
	case "a string":
		var s string
		if err := jsonString(raw, &s); err != nil {
			var bad *notUTF8Error
			if errors.As(err, &bad) {
				return time.Time{}, fmt.Errorf("not valid UTF-8 at byte %d", m.at+bad.at)
			}
			return time.Time{}, errors.New("must be an RFC 3339 time or unix milliseconds")
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, errors.New("must be an RFC 3339 time (2006-01-02T15:04:05Z) or unix milliseconds")
		}
		return t, nil
	case "a number":
		n, err := wholeNumber(raw)
		if err != nil {
			return time.Time{}, errors.New("unix milliseconds must be a whole number")
		}
		if n < 0 {
			return time.Time{}, fmt.Errorf("unix milliseconds must be at least 0, got %d", n)
		}
		return time.UnixMilli(n), nil
	default:
		return time.Time{}, fmt.Errorf("must be an RFC 3339 time or unix milliseconds, got %s", kindOf(raw))
	}
}
