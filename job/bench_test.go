package job

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchJob is a job as the bench and a typical upstream enqueue it: a browser's subscription
// (a real P-256 point), a 256-byte text payload, a ttl and an urgency, with the members in the
// order encoding/json writes a map's.
func benchJob(tb testing.TB) []byte {
	b, err := json.Marshal(map[string]any{
		"id": "job-000123456",
		"subscription": map[string]any{
			"endpoint":       "https://fcm.googleapis.com/fcm/send/dS8ZB6kXH1w:APA91bGz-bT4R1qSyfUdQ3wzHrNdPlw5B3f6x2Jv8tLqKcVmN0oYpRsTuWxYz",
			"expirationTime": nil,
			"keys":           map[string]string{"p256dh": testP256dh, "auth": testAuth},
		},
		"payload": strings.Repeat("x", 256), "ttl": 3600, "urgency": "normal",
		"recipient": "user-42", "enqueued_at": t0.UnixMilli() - 1000,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkDecode(b *testing.B) {
	raw := benchJob(b)
	if _, err := Decode(raw, t0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(raw, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeString is Decode as the intake and the lanes call it, on the string Redis
// gives them.
func BenchmarkDecodeString(b *testing.B) {
	raw := string(benchJob(b))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeString(raw, t0); err != nil {
			b.Fatal(err)
		}
	}
}
