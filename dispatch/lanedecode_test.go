package dispatch

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/stream"
)

// laneEntry is a lane entry as the intake (or the promoter) writes it, with fields replaced or
// (an empty value) removed.
func laneEntry(raw string, attempt int, enqueued time.Time, replace ...string) stream.Entry {
	f := map[string]string{
		"job": raw, "provider": "fcm", "attempt": strconv.Itoa(attempt),
		"enqueued_at": strconv.FormatInt(enqueued.UnixMilli(), 10),
	}
	for i := 0; i+1 < len(replace); i += 2 {
		if replace[i+1] == "" {
			delete(f, replace[i])
		} else {
			f[replace[i]] = replace[i+1]
		}
	}
	return stream.Entry{Stream: "wp:{0}:lane:fcm", ID: "1-1", Fields: f}
}

// TestParseLaneEntryChecksWhatItReads: a lane entry need not come from this worker's intake (a
// replay of the dead-letter stream, a retry, an older gateway): the lane decodes and checks the
// whole job again, and an entry it cannot use gets an error, whose reason beforeSend dead-letters.
func TestParseLaneEntryChecksWhatItReads(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	enq := now.Add(-time.Minute)
	sub := unitSub("fcm.googleapis.com")
	good := string(job("a", sub, "hello", "ttl", 60, "recipient", "r1"))

	lj, err := parseLaneEntry(laneEntry(good, 2, enq), now)
	if err != nil {
		t.Fatalf("a lane entry the intake wrote: %v", err)
	}
	if j := lj.job; j.ID != "a" || j.Subscription != sub || string(j.Payload) != "hello" || j.TTL != 60 || j.Recipient != "r1" ||
		lj.attempt != 2 || !lj.enqueued.Equal(enq) || lj.raw != good {
		t.Fatalf("decoded %+v (job %+v)", lj, lj.job)
	}

	offCurve := sub
	offCurve.Keys.P256dh = "B" + strings.Repeat("A", 86) // 65 bytes, but no point on P-256
	cases := []struct {
		name   string
		entry  stream.Entry
		reason string
	}{
		{"no job", laneEntry(good, 0, enq, "job", ""), `lane entry has no "job" field`},
		{"attempt not a number", laneEntry(good, 0, enq, "attempt", "one"), `lane entry: "attempt" is not a whole number`},
		{"attempt negative", laneEntry(good, 0, enq, "attempt", "-1"), `lane entry: "attempt" is not a whole number`},
		{"enqueued_at missing", laneEntry(good, 0, enq, "enqueued_at", ""), `lane entry: "enqueued_at" is not unix milliseconds`},
		{"job not JSON", laneEntry(`{"id":"a",`, 0, enq), "job: not valid JSON: unexpected end of input"},
		{"trailing data", laneEntry(good+"x", 0, enq), "job: unexpected data after the JSON object"},
		{"a key off the curve", laneEntry(string(job("a", offCurve, "hello")), 1, enq),
			"subscription.keys.p256dh: must be base64url of a 65-byte uncompressed P-256 point"},
		{"an endpoint that is no URL", laneEntry(strings.Replace(good, sub.Endpoint, "no url", 1), 0, enq),
			"subscription.endpoint: not an absolute URL with a host"},
		{"an unknown field", laneEntry(strings.Replace(good, `"id":"a"`, `"id":"a","extra":1`, 1), 0, enq), `unknown field "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parseLaneEntry(c.entry, now); err == nil || err.Error() != c.reason {
				t.Fatalf("reason %v, want %q", err, c.reason)
			}
		})
	}

	// Escapes and white space, which another writer may use, decode to the same job.
	spaced := strings.Replace(strings.Replace(good, `"id":"a"`, "\"id\" : \"\\u0061\"", 1), `"payload":"hello"`, `"payload":"hel\u006co"`, 1)
	lj2, err := parseLaneEntry(laneEntry(spaced, 2, enq), now)
	if err != nil {
		t.Fatalf("%s: %v", spaced, err)
	}
	if lj2.job.ID != "a" || string(lj2.job.Payload) != "hello" || lj2.job.Subscription != sub {
		t.Fatalf("escaped entry decoded to %+v", lj2.job)
	}
}

// BenchmarkParseLaneEntry is a lane's decode of one entry, as the bench's jobs look.
func BenchmarkParseLaneEntry(b *testing.B) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	raw := string(job("job-000123456", unitSub("fcm.googleapis.com"), strings.Repeat("x", 256), "ttl", 3600, "urgency", "normal"))
	e := laneEntry(raw, 0, now.Add(-time.Second))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseLaneEntry(e, now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDueAt: the wait before a send counts from the job's enqueued_at on a first attempt (a put
// back one too), from its send_at when that is later, and from the entry's write to the lane
// (its id) on a retry, whatever enqueued_at and send_at say.
func TestDueAt(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	enq := now.Add(-time.Hour)
	sub := unitSub("fcm.googleapis.com")
	plain := string(job("a", sub, "hello"))
	laterSendAt := string(job("a", sub, "hello", "send_at", enq.Add(20*time.Minute).UnixMilli()))
	earlierSendAt := string(job("a", sub, "hello", "send_at", enq.Add(-20*time.Minute).UnixMilli()))
	written := now.Add(-3 * time.Second)
	for _, c := range []struct {
		name    string
		raw     string
		attempt int
		id      string
		want    time.Time
	}{
		{"first attempt", plain, 0, "", enq},
		{"first attempt written long after its enqueue (put back)", plain, 0, strconv.FormatInt(written.UnixMilli(), 10) + "-0", enq},
		{"scheduled", laterSendAt, 0, "", enq.Add(20 * time.Minute)},
		{"send_at before enqueued_at", earlierSendAt, 0, "", enq},
		{"retry", plain, 3, strconv.FormatInt(written.UnixMilli(), 10) + "-7", written},
		{"retry of a scheduled job", laterSendAt, 1, strconv.FormatInt(written.UnixMilli(), 10) + "-0", written},
		{"retry with an id that holds no time", plain, 1, "x", enq},
	} {
		e := laneEntry(c.raw, c.attempt, enq)
		if c.id != "" {
			e.ID = c.id
		}
		lj, err := parseLaneEntry(e, now)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !lj.due.Equal(c.want) {
			t.Errorf("%s: due %v, want %v", c.name, lj.due, c.want)
		}
	}
}
