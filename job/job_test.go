package job

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeJobValid(t *testing.T) {
	sub := `"subscription":{"endpoint":"` + testEndpoint + `","expirationTime":null,"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
	ct := make([]byte, 21+65+17)
	ct[18] = 0x10 // rs 4096 (big-endian at bytes 16..19)
	ct[20] = 65
	ctB64 := base64.StdEncoding.EncodeToString(ct)
	exp := int64(1767225600000)
	base := Job{ID: "a", TTL: DefaultTTL, VAPIDKey: "default", Class: ClassTransactional, EnqueuedAt: t0}
	base.Subscription.Endpoint = testEndpoint
	base.Subscription.Keys.P256dh = testP256dh
	base.Subscription.Keys.Auth = testAuth
	with := func(f func(j *Job)) Job { j := base; f(&j); return j }
	cases := []struct {
		name string
		raw  string
		want Job
	}{
		{"minimal: an empty push", `{"id":"a",` + sub + `}`, base},
		{"text payload and every field", `{"id":"a",` + sub + `,"payload":"héllo","payload_encoding":"text","ttl":60,"urgency":"high",` +
			`"topic":"news-1_A","vapid_key":"k2","recipient":"user:42","enqueued_at":"2025-06-01T11:59:00Z"}`,
			with(func(j *Job) {
				j.Payload, j.TTL, j.Urgency, j.Topic, j.VAPIDKey, j.Recipient = []byte("héllo"), 60, "high", "news-1_A", "k2", "user:42"
				j.EnqueuedAt = t0.Add(-time.Minute)
			})},
		{"base64 payload, padded standard alphabet", `{"id":"a",` + sub + `,"payload":"AAEC/w==","payload_encoding":"base64"}`,
			with(func(j *Job) { j.Payload = []byte{0, 1, 2, 255} })},
		{"base64 payload, unpadded url alphabet", `{"id":"a",` + sub + `,"payload":"AAEC_w","payload_encoding":"base64"}`,
			with(func(j *Job) { j.Payload = []byte{0, 1, 2, 255} })},
		{"ciphertext", `{"id":"a",` + sub + `,"ciphertext":"` + ctB64 + `"}`, with(func(j *Job) { j.Ciphertext = ct })},
		{"ttl 0, ttl 1e3 style", `{"id":"a",` + sub + `,"ttl":1e3}`, with(func(j *Job) { j.TTL = 1000 })},
		{"enqueued_at unix ms", `{"id":"a",` + sub + `,"enqueued_at":1748779140000}`, with(func(j *Job) { j.EnqueuedAt = time.UnixMilli(1748779140000) })},
		{"enqueued_at with offset and fraction", `{"id":"a",` + sub + `,"enqueued_at":"2025-06-01T13:59:30.5+02:00"}`,
			with(func(j *Job) { j.EnqueuedAt = time.Date(2025, 6, 1, 11, 59, 30, 5e8, time.UTC) })},
		{"enqueued_at in the future is now", `{"id":"a",` + sub + `,"enqueued_at":"2030-01-01T00:00:00Z"}`, base},
		{"send_at RFC 3339 in the future is kept", `{"id":"a",` + sub + `,"send_at":"2030-01-01T00:00:00+01:00"}`,
			with(func(j *Job) { j.SendAt = time.Date(2029, 12, 31, 23, 0, 0, 0, time.UTC) })},
		{"send_at unix ms", `{"id":"a",` + sub + `,"send_at":1748779260000}`, with(func(j *Job) { j.SendAt = time.UnixMilli(1748779260000) })},
		{"send_at in the past is kept", `{"id":"a",` + sub + `,"send_at":"2025-06-01T11:00:00.25Z"}`,
			with(func(j *Job) { j.SendAt = time.Date(2025, 6, 1, 11, 0, 0, 25e7, time.UTC) })},
		{"send_at of year 1 is the epoch", `{"id":"a",` + sub + `,"send_at":"0001-01-01T00:00:00Z"}`, with(func(j *Job) { j.SendAt = time.UnixMilli(0) })},
		{"send_at null is absent", `{"id":"a",` + sub + `,"send_at":null}`, base},
		{"expirationTime with a fraction", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","expirationTime":1767225600000.75,"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}}`,
			with(func(j *Job) { j.Subscription.ExpirationTime = &exp })},
		{"nulls are absent", `{"id":"a",` + sub + `,"payload":null,"ttl":null,"urgency":null,"topic":null,"recipient":null,"enqueued_at":null}`, base},
		{"http endpoint parses (routing refuses it later)", `{"id":"a","subscription":{"endpoint":"http://push.example/x","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}}`,
			with(func(j *Job) { j.Subscription.Endpoint = "http://push.example/x" })},
		{"id of 128 printable characters", `{"id":"` + strings.Repeat("~", 128) + `",` + sub + `}`, with(func(j *Job) { j.ID = strings.Repeat("~", 128) })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode([]byte(c.raw), t0)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if d := cmp.Diff(&c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestDecodeJobInvalid(t *testing.T) {
	keys := `"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}`
	sub := `"subscription":{"endpoint":"` + testEndpoint + `",` + keys + `}`
	j := func(rest string) string { return `{"id":"a",` + sub + rest + `}` }
	cases := []struct {
		name, raw, reason string
	}{
		{"bad JSON", `{"id":"a",`, "job: not valid JSON: unexpected end of input"},
		{"bad JSON character", `{"id":"a" x}`, "job: not valid JSON at byte 10: invalid character 'x' after object key:value pair"},
		{"not an object", `["a"]`, "job: must be a JSON object, got an array"},
		{"null", `null`, "job: must be a JSON object, got null"},
		{"empty", ``, "job: not valid JSON: unexpected end of input"},
		{"trailing data", `{"id":"a"} {}`, "job: unexpected data after the JSON object"},
		{"unknown field", j(`,"priority":5`), `unknown field "priority"`},
		{"unknown field before anything else", `{"Id":"a"}`, `unknown field "Id"`},
		{"duplicate field", `{"id":"a","id":"b"}`, `duplicate field "id"`},
		{"missing id", `{` + sub + `}`, "id: required"},
		{"null id", `{"id":null,` + sub + `}`, "id: required"},
		{"numeric id", `{"id":5,` + sub + `}`, "id: must be a string, got a number"},
		{"empty id", `{"id":"",` + sub + `}`, "id: must be 1 to 128 characters, got 0"},
		{"long id", `{"id":"` + strings.Repeat("a", 129) + `",` + sub + `}`, "id: must be 1 to 128 characters, got 129"},
		{"id with a newline", `{"id":"a\nb",` + sub + `}`, "id: byte 1 is not printable ASCII"},
		{"id not ASCII", `{"id":"é",` + sub + `}`, "id: byte 0 is not printable ASCII"},
		{"missing subscription", `{"id":"a"}`, "subscription: required"},
		{"subscription a string", `{"id":"a","subscription":"x"}`, "subscription: must be an object, got a string"},
		{"subscription unknown field", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","extra":1,` + keys + `}}`, `subscription: unknown field "extra"`},
		{"missing endpoint", `{"id":"a","subscription":{` + keys + `}}`, "subscription.endpoint: required"},
		{"empty endpoint", `{"id":"a","subscription":{"endpoint":"",` + keys + `}}`, "subscription.endpoint: must not be empty"},
		{"endpoint not a URL", `{"id":"a","subscription":{"endpoint":"https://fcm.googleapis.com/%zz/SECRET",` + keys + `}}`, "subscription.endpoint: not a valid URL"},
		{"relative endpoint", `{"id":"a","subscription":{"endpoint":"/fcm/send/SECRET",` + keys + `}}`, "subscription.endpoint: not an absolute URL with a host"},
		{"endpoint without host", `{"id":"a","subscription":{"endpoint":"https:///SECRET",` + keys + `}}`, "subscription.endpoint: not an absolute URL with a host"},
		{"opaque endpoint", `{"id":"a","subscription":{"endpoint":"mailto:SECRET@example.com",` + keys + `}}`, "subscription.endpoint: not an absolute URL with a host"},
		{"long endpoint", `{"id":"a","subscription":{"endpoint":"https://h/` + strings.Repeat("S", 8192) + `",` + keys + `}}`, "subscription.endpoint: is 8202 bytes; at most 8192"},
		{"expirationTime a string", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","expirationTime":"soon",` + keys + `}}`, "subscription.expirationTime: must be a number or null, got a string"},
		{"missing keys", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `"}}`, "subscription.keys: required"},
		{"keys an array", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":[]}}`, "subscription.keys: must be an object, got an array"},
		{"missing p256dh", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"auth":"` + testAuth + `"}}}`, "subscription.keys.p256dh: required"},
		{"missing auth", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `"}}}`, "subscription.keys.auth: required"},
		{"keys unknown field", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `","x":"y"}}}`, `subscription.keys: unknown field "x"`},
		{"p256dh not a point", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"BAAA","auth":"` + testAuth + `"}}}`, "subscription.keys.p256dh: must be base64url of a 65-byte uncompressed P-256 point"},
		{"p256dh bad base64", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"!!!","auth":"` + testAuth + `"}}}`, "subscription.keys.p256dh: must be base64url of a 65-byte uncompressed P-256 point"},
		{"auth too short", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"AAAA"}}}`, "subscription.keys.auth: must be base64url of 16 bytes"},
		{"auth a number", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":1}}}`, "subscription.keys.auth: must be a string, got a number"},
		{"payload and ciphertext both", j(`,"payload":"x","ciphertext":"AAAA"`), "payload and ciphertext: give one, not both"},
		{"payload not a string", j(`,"payload":{"a":1}`), "payload: must be a string, got an object"},
		{"bad payload base64", j(`,"payload":"%%%","payload_encoding":"base64"`), "payload: not valid base64"},
		{"bad payload_encoding", j(`,"payload":"x","payload_encoding":"hex"`), "payload_encoding: must be text or base64"},
		{"payload_encoding without payload", j(`,"payload_encoding":"base64"`), "payload_encoding: given without payload"},
		{"payload too large", j(`,"payload":"` + strings.Repeat("p", 3994) + `"`), "payload: is 3994 bytes; at most 3993 (one 4096-byte aes128gcm body)"},
		{"bad ciphertext base64", j(`,"ciphertext":"%%%"`), "ciphertext: not valid base64"},
		{"ciphertext too short", j(`,"ciphertext":"AAAA"`), "ciphertext: not an aes128gcm body (3 bytes is shorter than its header)"},
		{"ciphertext too large", j(`,"ciphertext":"` + base64.StdEncoding.EncodeToString(make([]byte, 5001)) + `"`), "ciphertext: is 5001 bytes; at most 5000"},
		{"ciphertext small record size", j(`,"ciphertext":"` + base64.StdEncoding.EncodeToString(make([]byte, 40)) + `"`), "ciphertext: not an aes128gcm body (record size 0 is below 18)"},
		{"ttl negative", j(`,"ttl":-1`), "ttl: must be at least 0, got -1"},
		{"ttl fraction", j(`,"ttl":1.5`), "ttl: must be a whole number, got 1.5"},
		{"ttl a string", j(`,"ttl":"60"`), "ttl: must be a whole number, got a string"},
		{"ttl huge", j(`,"ttl":99999999999`), "ttl: must be at most 2147483647, got 99999999999"},
		{"bad urgency", j(`,"urgency":"urgent"`), "urgency: must be one of very-low, low, normal, high"},
		{"urgency a number", j(`,"urgency":1`), "urgency: must be a string, got a number"},
		{"topic too long", j(`,"topic":"` + strings.Repeat("t", 33) + `"`), "topic: must be 1 to 32 characters of the URL-safe base64 alphabet"},
		{"topic with a space", j(`,"topic":"a b"`), "topic: must be 1 to 32 characters of the URL-safe base64 alphabet"},
		{"empty vapid_key", j(`,"vapid_key":""`), "vapid_key: must be 1 to 128 printable ASCII characters"},
		{"recipient too long", j(`,"recipient":"` + strings.Repeat("r", 257) + `"`), "recipient: is 257 bytes; at most 256"},
		{"enqueued_at bad string", j(`,"enqueued_at":"yesterday"`), "enqueued_at: must be an RFC 3339 time (2006-01-02T15:04:05Z) or unix milliseconds"},
		{"enqueued_at date only", j(`,"enqueued_at":"2025-06-01"`), "enqueued_at: must be an RFC 3339 time (2006-01-02T15:04:05Z) or unix milliseconds"},
		{"enqueued_at negative", j(`,"enqueued_at":-5`), "enqueued_at: unix milliseconds must be at least 0, got -5"},
		{"enqueued_at fraction", j(`,"enqueued_at":1.5`), "enqueued_at: unix milliseconds must be a whole number"},
		{"enqueued_at a bool", j(`,"enqueued_at":true`), "enqueued_at: must be an RFC 3339 time or unix milliseconds, got a boolean"},
		{"send_at bad string", j(`,"send_at":"tomorrow"`), "send_at: must be an RFC 3339 time (2006-01-02T15:04:05Z) or unix milliseconds"},
		{"send_at without a zone", j(`,"send_at":"2025-06-01T12:00:00"`), "send_at: must be an RFC 3339 time (2006-01-02T15:04:05Z) or unix milliseconds"},
		{"send_at negative", j(`,"send_at":-1`), "send_at: unix milliseconds must be at least 0, got -1"},
		{"send_at fraction", j(`,"send_at":1748779260000.5`), "send_at: unix milliseconds must be a whole number"},
		{"send_at an object", j(`,"send_at":{}`), "send_at: must be an RFC 3339 time or unix milliseconds, got an object"},
		{"send_at twice", j(`,"send_at":1,"send_at":2`), `duplicate field "send_at"`},
		{"10 MB entry", `{"id":"a","payload":"` + strings.Repeat("x", 10<<20-23) + `"}`, "entry is 10485760 bytes; at most 65536"},
		{"one byte too many", `{"id":"a","payload":"` + strings.Repeat("x", 65537-23) + `"}`, "entry is 65537 bytes; at most 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode([]byte(c.raw), t0)
			if err == nil {
				t.Fatalf("Decode accepted it: %+v", got)
			}
			var ije *InvalidError
			if !errors.As(err, &ije) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not an InvalidError wrapping ErrInvalid", err)
			}
			if ije.Reason != c.reason {
				t.Errorf("reason\n got: %s\nwant: %s", ije.Reason, c.reason)
			}
			if err.Error() != "job: invalid job: "+c.reason {
				t.Errorf("Error() = %q", err.Error())
			}
			for _, secret := range []string{"SECRET", testP256dh, testAuth} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks a credential: %v", err)
				}
			}
		})
	}
}

// TestDecodeJobRefusesInvalidUTF8: a string that is not valid UTF-8 is refused, naming the field
// and the offset in the entry of the first bad byte (or of the escape of a lone surrogate), on
// the fast path and on the slow one (an escaped member name), at the top level and nested.
// encoding/json would have sent U+FFFD in its place.
func TestDecodeJobRefusesInvalidUTF8(t *testing.T) {
	keys := `"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}`
	sub := `"subscription":{"endpoint":"` + testEndpoint + `",` + keys + `}`
	j := func(rest string) string { return `{"id":"a",` + sub + rest + `}` }
	const mark = "\x00" // where the bad byte is; replaced by the case's bad bytes
	tests := []struct {
		name, raw, bad, field string
	}{
		{"payload: a byte that starts nothing", j(`,"payload":"hello ` + mark + ` world"`), "\xff", "payload"},
		{"payload: a sequence cut short", j(`,"payload":"caf` + mark + `"`), "\xc3", "payload"},
		{"payload: overlong", j(`,"payload":"` + mark + `"`), "\xc0\xaf", "payload"},
		{"payload: a surrogate in UTF-8", j(`,"payload":"x` + mark + `"`), "\xed\xa0\x80", "payload"},
		{"payload: after an escape", j(`,"payload":"line\nnext ` + mark + `"`), "\xfe", "payload"},
		{"payload: a lone high surrogate", j(`,"payload":"smile ` + mark + `"`), `\ud83d`, "payload"},
		{"payload: a lone low surrogate", j(`,"payload":"` + mark + `\ud83d"`), `\ude00`, "payload"},
		{"payload: base64 too", j(`,"payload_encoding":"base64","payload":"AAAA` + mark + `"`), "\xff", "payload"},
		{"payload: slow path", `{"\u0069d":"a",` + sub + `,"payload":"x` + mark + `"}`, "\xff", "payload"},
		{"id", `{"id":"a` + mark + `",` + sub + `}`, "\xff", "id"},
		{"endpoint", `{"id":"a","subscription":{"endpoint":"https://push.example/` + mark + `",` + keys + `}}`, "\xff", "subscription.endpoint"},
		{"endpoint: nested slow path", `{"id":"a","subscription":{"\u0065ndpoint":"https://push.example/` + mark + `",` + keys + `}}`, "\xff", "subscription.endpoint"},
		{"p256dh", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"B` + mark + `","auth":"` + testAuth + `"}}}`, "\xff", "subscription.keys.p256dh"},
		{"auth", `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + mark + `"}}}`, `\udfff`, "subscription.keys.auth"},
		{"payload_encoding", j(`,"payload":"x","payload_encoding":"text` + mark + `"`), "\xff", "payload_encoding"},
		{"ciphertext", j(`,"ciphertext":"` + mark + `"`), "\xff", "ciphertext"},
		{"urgency", j(`,"urgency":"high` + mark + `"`), "\xff", "urgency"},
		{"topic", j(`,"topic":"` + mark + `"`), "\xff", "topic"},
		{"vapid_key", j(`,"vapid_key":"k` + mark + `"`), "\xff", "vapid_key"},
		{"recipient", j(`,"recipient":"user-` + mark + `"`), "\xff", "recipient"},
		{"enqueued_at", j(`,"enqueued_at":"2025-06-01T00:00:00Z` + mark + `"`), "\xff", "enqueued_at"},
		{"notification.title", j(`,"notification":{"title":"Hi ` + mark + `","navigate":"https://shop.example/"}`), "\xff", "notification.title"},
		{"notification.body: a lone surrogate", j(`,"notification":{"title":"Hi","body":"` + mark + `","navigate":"https://shop.example/"}`), `\ud83d`, "notification.body"},
		{"notification.data", j(`,"notification":{"title":"Hi","navigate":"https://shop.example/","data":{"k":"` + mark + `"}}`), "\xfe", "notification.data"},
		{"notification.data: a member name", j(`,"notification":{"title":"Hi","navigate":"https://shop.example/","data":[1,{"a":"\"","` + mark + `":2}]}`), "\xc3", "notification.data"},
		{"notification.data: a lone surrogate", j(`,"notification":{"title":"Hi","navigate":"https://shop.example/","data":["ok","x` + mark + `"]}`), `\udc00`, "notification.data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at := strings.Index(tc.raw, mark)
			raw := strings.Replace(tc.raw, mark, tc.bad, 1)
			got, err := Decode([]byte(raw), t0)
			var ije *InvalidError
			if !errors.As(err, &ije) {
				t.Fatalf("Decode = %+v, %v; want INVALID_JOB", got, err)
			}
			if want := fmt.Sprintf("%s: not valid UTF-8 at byte %d", tc.field, at); ije.Reason != want {
				t.Fatalf("reason\n got: %s\nwant: %s", ije.Reason, want)
			}
		})
	}
}

// TestDecodeJobKeepsValidUnicode: escapes of whole code points, surrogate pairs and U+FFFD
// itself are text like any other.
func TestDecodeJobKeepsValidUnicode(t *testing.T) {
	raw := jobWith("a", nil)
	raw = strings.Replace(raw, `"payload":"hello"`, `"payload":"\ud83d\ude00 caf\u00e9 \ufffd `+"\xef\xbf\xbd"+` \u2713"`, 1)
	j, err := Decode([]byte(raw), t0)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if want := "😀 café \uFFFD \uFFFD ✓"; string(j.Payload) != want {
		t.Fatalf("payload %q, want %q", j.Payload, want)
	}
}

// FuzzDecodeJob: Decode never panics, never accepts what breaks its own limits, and never
// puts the endpoint or keys into a reason.
func FuzzDecodeJob(f *testing.F) {
	f.Add([]byte(validJob("a")))
	f.Add([]byte(jobWith("b", map[string]any{"payload": "AAEC", "payload_encoding": "base64", "ttl": 5, "urgency": "low", "enqueued_at": "2025-06-01T00:00:00Z"})))
	f.Add([]byte(jobWith("c", map[string]any{"payload": nil, "ciphertext": base64.StdEncoding.EncodeToString(make([]byte, 103)), "topic": "t"})))
	f.Add([]byte(`{"id":"a","id":"a"}`))
	f.Add([]byte(`{"id":"a","subscription":{"endpoint":"https://x/SECRET","keys":{"p256dh":"A","auth":"B"}},"enqueued_at":1e3}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(jobWith("s1", map[string]any{"send_at": "2030-01-01T00:00:00.5-07:00", "ttl": 60})))
	f.Add([]byte(jobWith("s2", map[string]any{"send_at": 1748779260000})))
	f.Add([]byte(jobWith("s3", map[string]any{"send_at": -1e20})))
	// Strings that are not UTF-8, on the fast path, the slow path and nested.
	f.Add([]byte(jobWith("d", map[string]any{"payload": nil}) + "\xff"))
	f.Add([]byte(strings.Replace(validJob("e"), `"payload":"hello"`, "\"payload\":\"hel\xfflo\"", 1)))
	f.Add([]byte(strings.Replace(validJob("f"), `"payload":"hello"`, `"payload":"\ud83d\ude00\ud83d"`, 1)))
	f.Add([]byte(strings.Replace(validJob("g"), `"payload":"hello"`, "\"\\u0070ayload\":\"\xc3(\"", 1)))
	f.Add([]byte(strings.Replace(validJob("h"), "SECRET-PATH", "SECRET\xed\xa0\x80PATH", 1)))
	f.Add([]byte(strings.Replace(validJob("i"), `"payload":"hello"`, "\"recipient\":\"\xf0\x9f\x98\"", 1)))
	// Declarative notifications: every member, the slow path, a broken one, one over the limit.
	f.Add([]byte(jobWith("n1", map[string]any{"payload": nil, "notification": map[string]any{
		"title": "Hi <b>", "body": "b", "navigate": "https://shop.example/o?a=1&b=2", "lang": "en-US", "dir": "rtl",
		"silent": true, "tag": "t", "app_badge": 7, "mutable": false, "data": map[string]any{"k": []any{1, "two", nil}}}})))
	f.Add([]byte(strings.Replace(validJob("n2"), `"payload":"hello"`, `"notification":{"\u0074itle":"Hi","navigate":"https://shop.example/"}`, 1)))
	f.Add([]byte(strings.Replace(validJob("n3"), `"payload":"hello"`, `"notification":{"title":"","navigate":"http://shop.example/","app_badge":-1}`, 1)))
	f.Add([]byte(strings.Replace(validJob("n4"), `"payload":"hello"`, `"notification":{"title":"`+strings.Repeat(`\u0001`, 700)+`","navigate":"https://shop.example/"}`, 1)))
	f.Add([]byte(strings.Replace(validJob("n5"), `"payload":"hello"`, "\"notification\":{\"title\":\"Hi\",\"navigate\":\"https://shop.example/\",\"data\":\"\xff\"}", 1)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		j, err := Decode(raw, t0)
		if err != nil {
			var ije *InvalidError
			if !errors.As(err, &ije) || ije.Reason == "" {
				t.Fatalf("error %v is not an InvalidError with a reason", err)
			}
			// A UTF-8 reason points at a bad byte of the entry, or at an escaped surrogate.
			if _, rest, ok := strings.Cut(ije.Reason, ": not valid UTF-8 at byte "); ok {
				at, convErr := strconv.Atoi(rest)
				if convErr != nil || at < 0 || at >= len(raw) {
					t.Fatalf("reason %q names no byte of the %d-byte entry", ije.Reason, len(raw))
				}
				r, n := utf8.DecodeRune(raw[at:])
				escaped := bytes.HasPrefix(raw[at:], []byte(`\u`)) && len(raw) >= at+6 && utf16.IsSurrogate(hex4(string(raw[at+2:at+6])))
				if !(r == utf8.RuneError && n == 1) && !escaped {
					t.Fatalf("reason %q: byte %d (%q) is valid UTF-8", ije.Reason, at, raw[at:min(at+6, len(raw))])
				}
			}
			// A reason may name a field (unknown or duplicate) but never repeat the endpoint.
			var lenient struct {
				Subscription struct {
					Endpoint string `json:"endpoint"`
				} `json:"subscription"`
			}
			_ = json.Unmarshal(raw, &lenient)
			ep := lenient.Subscription.Endpoint
			if len(ep) >= 8 && strings.Contains(ep, "/") && !strings.Contains(ije.Reason, `field "`) && strings.Contains(ije.Reason, ep) {
				t.Fatalf("reason quotes the endpoint: %s", ije.Reason)
			}
			return
		}
		switch {
		case len(raw) > MaxEntryBytes:
			t.Fatal("accepted an oversized entry")
		case j.ID == "" || len(j.ID) > MaxIDLen || !isPrintableASCII(j.ID):
			t.Fatalf("accepted id %q", j.ID)
		case j.Subscription.Endpoint == "" || len(j.Subscription.Endpoint) > MaxEndpointLen:
			t.Fatal("accepted a bad endpoint")
		case j.Payload != nil && j.Ciphertext != nil:
			t.Fatal("accepted payload and ciphertext")
		case len(j.Payload) > MaxPayload || len(j.Ciphertext) > MaxCiphertext:
			t.Fatal("accepted an oversized body")
		case j.TTL < 0:
			t.Fatal("accepted a negative ttl")
		case j.EnqueuedAt.After(t0):
			t.Fatal("enqueued_at after now")
		case j.VAPIDKey == "":
			t.Fatal("empty vapid_key")
		}
		switch j.Urgency {
		case "", "very-low", "low", "normal", "high":
		default:
			t.Fatalf("accepted urgency %q", j.Urgency)
		}
		if j.Notification != nil {
			checkDeclarative(t, j)
		}
		// No U+FFFD was put in for what was not UTF-8: an accepted string holds one only where
		// the entry wrote one.
		if !bytes.Contains(raw, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
			for _, s := range []string{j.Subscription.Endpoint, j.Recipient, j.VAPIDKey, j.ID} {
				if strings.ContainsRune(s, utf8.RuneError) {
					t.Fatalf("accepted %q, with a U+FFFD the entry did not write", s)
				}
			}
			if !bytes.Contains(raw, []byte("base64")) && bytes.ContainsRune(j.Payload, utf8.RuneError) {
				t.Fatalf("accepted text payload %q, with a U+FFFD the entry did not write", j.Payload)
			}
		}
	})
}

// checkDeclarative: the payload of a job with a notification is its rendering, a declarative
// push message a browser takes: UTF-8 JSON with web_push 8030, a title and an https navigate.
func checkDeclarative(t *testing.T, j *Job) {
	t.Helper()
	n := j.Notification
	if j.Ciphertext != nil || !bytes.Equal(j.Payload, n.Render()) {
		t.Fatalf("payload %q is not the notification's rendering", j.Payload)
	}
	if !utf8.Valid(j.Payload) {
		t.Fatalf("rendered payload %q is not UTF-8", j.Payload)
	}
	var doc struct {
		WebPush      *int `json:"web_push"`
		Notification struct {
			Title    string `json:"title"`
			Navigate string `json:"navigate"`
		} `json:"notification"`
	}
	if err := json.Unmarshal(j.Payload, &doc); err != nil {
		t.Fatalf("rendered payload %q is not JSON: %v", j.Payload, err)
	}
	nav, err := url.Parse(doc.Notification.Navigate)
	switch {
	case doc.WebPush == nil || *doc.WebPush != DeclarativeMagic:
		t.Fatalf("rendered payload %q has no web_push 8030", j.Payload)
	case doc.Notification.Title == "" || doc.Notification.Title != n.Title:
		t.Fatalf("rendered title %q, notification's %q", doc.Notification.Title, n.Title)
	case err != nil || nav.Scheme != "https" || nav.Host == "" || doc.Notification.Navigate != n.Navigate:
		t.Fatalf("rendered navigate %q is not the notification's https URL", doc.Notification.Navigate)
	}
}
