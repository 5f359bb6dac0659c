package main

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

func TestReportDurationAndBytes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-3 * time.Second:         "0s",
		0:                        "0s",
		420 * time.Millisecond:   "400ms",
		3456 * time.Millisecond:  "3.5s",
		12600 * time.Millisecond: "13s",
		252 * time.Second:        "4m12s",
		time.Hour + 7*time.Minute + 29*time.Second: "1h7m0s",
	} {
		if got := reportDuration(d); got != want {
			t.Errorf("reportDuration(%v) = %q, want %q", d, got, want)
		}
	}
	if got := reportAge(-0.5); got != "0s" {
		t.Errorf("reportAge(-0.5) = %q, want 0s", got)
	}
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if got := reportWhen(now.Add(90*time.Second), now); got != "in 1m30s" {
		t.Errorf("reportWhen of a time to come = %q", got)
	}
	if got := reportWhen(now, now); got != "0s ago" {
		t.Errorf("reportWhen of now = %q", got)
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 3 << 30: "3.0 GiB", 5 << 40: "5.0 TiB"} {
		if got := reportBytes(n); got != want {
			t.Errorf("reportBytes(%d) = %q, want %q", n, got, want)
		}
	}
	for s, want := range map[string]string{"": "-", "fcm": "fcm", "a b": "a b", "a\nb": `"a\nb"`, "\x1b[2J": `"\x1b[2J"`} {
		if got := cli.Dash(s); got != want {
			t.Errorf("cli.Dash(%q) = %q, want %q", s, got, want)
		}
	}
}
