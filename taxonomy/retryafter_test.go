package taxonomy_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 10, 21, 7, 28, 0, 0, time.UTC)
	type result struct {
		D  time.Duration
		OK bool
	}
	tests := []struct {
		name string
		v    string
		now  time.Time
		want result
	}{
		{"empty", "", now, result{0, false}},
		{"zero seconds", "0", now, result{0, true}},
		{"seconds", "120", now, result{120 * time.Second, true}},
		{"optional whitespace", " \t30 ", now, result{30 * time.Second, true}},
		{"leading zeros", "0005", now, result{5 * time.Second, true}},
		{"negative", "-5", now, result{0, false}},
		{"plus sign", "+5", now, result{0, false}},
		{"fraction", "1.5", now, result{0, false}},
		{"junk", "soon", now, result{0, false}},
		{"two values", "5, 6", now, result{0, false}},
		{"a day exactly", "86400", now, result{24 * time.Hour, true}},
		{"over a day is capped", "86401", now, result{24 * time.Hour, true}},
		{"overflow is capped", "99999999999999999999999", now, result{24 * time.Hour, true}},
		{"IMF-fixdate", "Wed, 21 Oct 2026 07:28:45 GMT", now, result{45 * time.Second, true}},
		{"RFC 850 date", "Wednesday, 21-Oct-26 07:28:45 GMT", now, result{45 * time.Second, true}},
		{"asctime date", "Wed Oct 21 07:28:45 2026", now, result{45 * time.Second, true}},
		{"date measured from a sub-second now", "Wed, 21 Oct 2026 07:28:45 GMT", now.Add(500 * time.Millisecond), result{44500 * time.Millisecond, true}},
		{"date equal to now", "Wed, 21 Oct 2026 07:28:00 GMT", now, result{0, false}},
		{"date in the past", "Wed, 21 Oct 2026 07:27:00 GMT", now, result{0, false}},
		{"RFC 850 date of 1994 is past", "Sunday, 06-Nov-94 08:49:37 GMT", now, result{0, false}},
		{"date two days ahead is capped", "Fri, 23 Oct 2026 07:28:00 GMT", now, result{24 * time.Hour, true}},
		{"far date from a zero clock is capped", "Fri, 31 Dec 9999 23:59:59 GMT", time.Time{}, result{24 * time.Hour, true}},
		{"malformed date", "Wed, 32 Oct 2026 07:28:45 GMT", now, result{0, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := taxonomy.ParseRetryAfter(tt.v, tt.now)
			if diff := cmp.Diff(tt.want, result{d, ok}); diff != "" {
				t.Errorf("ParseRetryAfter(%q) (-want +got):\n%s", tt.v, diff)
			}
		})
	}
}
