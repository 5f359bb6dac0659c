package registrytest

import (
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/limits"
)

func TestBreakerLogFollowsEachProvider(t *testing.T) {
	var b BreakerLog
	if b.State("apple") != limits.Closed || b.Reached("apple", limits.Open) {
		t.Fatal("an empty log: want apple closed and never opened")
	}
	start := time.Now()
	b.Hook("apple", limits.Closed, limits.Open)
	opened := time.Now()
	b.Hook("fcm", limits.Closed, limits.Open)
	b.Hook("apple", limits.Open, limits.HalfOpen)
	b.Hook("apple", limits.HalfOpen, limits.Closed)

	if got := b.Of("apple"); len(got) != 3 || got[0].To != limits.Open || got[1].To != limits.HalfOpen || got[2].From != limits.HalfOpen {
		t.Fatalf("Of(apple) = %+v, want closed->open, open->half-open, half-open->closed", got)
	}
	if !b.Reached("apple", limits.HalfOpen) || b.Reached("fcm", limits.Closed) {
		t.Error("Reached: want apple half-open once, fcm never closed by a change")
	}
	if b.State("apple") != limits.Closed || b.State("fcm") != limits.Open || b.State("wns") != limits.Closed {
		t.Errorf("State: apple %v, fcm %v, wns %v; want closed, open, closed", b.State("apple"), b.State("fcm"), b.State("wns"))
	}
	if !b.OpenedIn("apple", start, opened.Add(time.Nanosecond)) || b.OpenedIn("apple", opened.Add(time.Hour), opened.Add(2*time.Hour)) {
		t.Error("OpenedIn: want apple opened between start and its change, not an hour later")
	}
	if s := b.Summary(start); strings.Count(s, ",") != 3 || !strings.Contains(s, "apple closed->open") || !strings.Contains(s, "fcm closed->open") {
		t.Errorf("Summary = %q, want four changes, apple's and fcm's", s)
	}
}
