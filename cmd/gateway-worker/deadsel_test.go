package main

import (
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"90s", "30m", "2h", "7d", "1d12h", "2025-06-01T12:00:00Z", "2025-06-01T12:00:00.5+02:00", "", "d", "-5m", "99999999d"} {
		f.Add(s)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseWhen(s, now)
		if err != nil {
			if !strings.Contains(err.Error(), "neither an RFC 3339 time") {
				t.Fatalf("parseWhen(%q): error %v does not say what it wants", s, err)
			}
			return
		}
		if _, perr := time.Parse(time.RFC3339Nano, s); perr != nil && got.After(now) {
			t.Fatalf("parseWhen(%q) = %v: a duration ago is after now", s, got)
		}
	})
}

func TestParseDeadRef(t *testing.T) {
	for _, c := range []struct {
		ref       string
		shard     int
		id        string
		ok, isBad bool
	}{
		{"1717171717171-0", -1, "1717171717171-0", true, false},
		{"2/1717171717171-3", 2, "1717171717171-3", true, false},
		{"4/1717171717171-3", 0, "", true, true}, // a shard beyond the 4 there are
		{"job-1", 0, "", false, false},
		{"1/x-0", 0, "", false, false},
	} {
		r, ok, err := parseDeadRef(c.ref, 4)
		if r.Shard != c.shard || r.EntryID != c.id || ok != c.ok || (err != nil) != c.isBad {
			t.Errorf("parseDeadRef(%q) = %d, %q, %v, %v; want %d, %q, %v, bad ref %v", c.ref, r.Shard, r.EntryID, ok, err, c.shard, c.id, c.ok, c.isBad)
		}
		if ok && err == nil && refText(r) != c.ref {
			t.Errorf("refText(parseDeadRef(%q)) = %q", c.ref, refText(r))
		}
	}
	d := inspect.DeadEntry{Shard: 2, EntryID: "5-0"}
	if entryRef(d, 1) != "5-0" || entryRef(d, 3) != "2/5-0" {
		t.Errorf("entryRef = %q with 1 shard, %q with 3", entryRef(d, 1), entryRef(d, 3))
	}
}

func TestNewDeadFilter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f, err := newDeadFilter("timeout", "PROVIDER_DOWN", "fcm", "2h", "2026-01-01T11:30:00Z", now)
	if err != nil || !f.Since.Equal(now.Add(-2*time.Hour)) || !f.Until.Equal(now.Add(-30*time.Minute)) ||
		f.Reason != "timeout" || f.Code != "PROVIDER_DOWN" || f.Provider != "fcm" {
		t.Errorf("newDeadFilter = %+v, %v", f, err)
	}
	if _, err := newDeadFilter("", "", "", "1h", "2h", now); err == nil || !strings.Contains(err.Error(), "is before --since") {
		t.Errorf("until before since: %v", err)
	}
	if _, err := newDeadFilter("", "", "", "soon", "", now); err == nil || !strings.HasPrefix(err.Error(), "--since: ") {
		t.Errorf("a bad --since: %v", err)
	}
	if _, err := newDeadFilter("", "PROVIDER_DEAD", "", "", "", now); err == nil || !strings.HasPrefix(err.Error(), `--code "PROVIDER_DEAD" is not an outcome code (one of [`) {
		t.Errorf("a code that is none: %v", err)
	}
}

// TestCheckDeadChoice: a replay or purge names its records one way, and each ref is an entry id.
func TestCheckDeadChoice(t *testing.T) {
	for _, c := range []struct {
		name          string
		refs          []string
		filtered, all bool
		want          string // the start of the error; "" for none
	}{
		{"refs", []string{"1717171717171-0", "2/1717171717171-3"}, false, false, ""},
		{"a filter", nil, true, false, ""},
		{"all", nil, false, true, ""},
		{"nothing", nil, false, false, "choose the records: ENTRY_ID..., a filter"},
		{"all and a filter", nil, true, true, "choose the records one way"},
		{"refs and a filter", []string{"1-0"}, true, false, "choose the records one way"},
		{"a job id for an entry id", []string{"1-0", "job-1"}, false, false, `"job-1" is not an entry id`},
	} {
		err := checkDeadChoice(c.refs, c.filtered, c.all)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestCheckPauseRequest(t *testing.T) {
	if err := checkPauseRequest("fcm", "maintenance window"); err != nil {
		t.Errorf("a plain pause: %v", err)
	}
	for _, c := range [][2]string{{"", ""}, {"f cm", ""}, {"fcm", "a\nb"}, {"fcm", "\xff"}, {"fcm", strings.Repeat("x", maxPauseReason+1)}} {
		if err := checkPauseRequest(c[0], c[1]); err == nil {
			t.Errorf("checkPauseRequest(%q, %q) accepted", c[0], c[1])
		}
	}
}
