package stream

import (
	"strings"
	"testing"
	"time"
)

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"90s", "30m", "2h", "7d", "1d12h", "2025-06-01T12:00:00Z", "2025-06-01T12:00:00.5+02:00", "", "d", "-5m", "99999999d"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseWhen(s, now)
		if err != nil {
			if !strings.Contains(err.Error(), "neither an RFC 3339 time") {
				t.Fatalf("ParseWhen(%q): error %v does not say what it wants", s, err)
			}
			return
		}
		if _, perr := time.Parse(time.RFC3339Nano, s); perr != nil && got.After(now) {
			t.Fatalf("ParseWhen(%q) = %v: a duration ago is after now", s, got)
		}
	})
}
