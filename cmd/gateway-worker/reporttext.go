package main

import (
	"fmt"
	"time"
)

// How the operators' reports print what they hold: times for a person and sizes in binary
// units (text read from Redis prints with cli.Dash). The report files share them so that the
// same figure reads the same in `status`, `inspect` and `campaign status`.

// reportWhen says when t is from now: "in 4m12s" or "3m0s ago".
func reportWhen(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + reportDuration(d)
	}
	return reportDuration(now.Sub(t)) + " ago"
}

// reportDuration is d for a person: to a tenth of a second under ten seconds, to the second
// under an hour, else to the minute. A negative d (an age taken from a time another host's
// clock wrote, ahead of this one's) is 0s.
func reportDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// reportAge is reportDuration of a number of seconds, as the reports' JSON gives ages.
func reportAge(sec float64) string {
	return reportDuration(time.Duration(sec * float64(time.Second)))
}

// reportBytes is n bytes in the largest binary unit it holds one of (B, KiB, MiB, ...), with
// one decimal past bytes.
func reportBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
