package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// TestDecodeSubscriptionAsAJobsMember: a subscription on its own is refused exactly when it
// would be as a job's "subscription", with the same reason (the offsets of UTF-8 reasons
// apart, which count from the start of what was read).
func TestDecodeSubscriptionAsAJobsMember(t *testing.T) {
	keys := `"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}`
	for _, sub := range []string{
		`{"endpoint":"` + testEndpoint + `",` + keys + `}`,
		`{"endpoint":"` + testEndpoint + `","expirationTime":1767225600000,` + keys + `}`,
		`{"endpoint":"http://push.example/x",` + keys + `}`,
		`{"endpoint":"` + testEndpoint + `",` + keys + `,"contentEncoding":["aes128gcm"]}`,
		`{"endpoint":"` + testEndpoint + `","endpoint":"x",` + keys + `}`,
		`{"endpoint":"` + testEndpoint + `"}`,
		`{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `"}}`,
		`{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"AAAA"}}`,
		`{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `","x":1}}`,
		`{"endpoint":"","keys":{}}`,
		`{"endpoint":"/relative",` + keys + `}`,
		`{"endpoint":1,` + keys + `}`,
		`{` + keys + `}`,
		`[]`,
		`"https://push.example/x"`,
	} {
		fromJob, jobErr := Decode([]byte(`{"id":"a","subscription":`+sub+`}`), t0)
		alone, err := DecodeSubscription([]byte(sub))
		if (jobErr == nil) != (err == nil) {
			t.Errorf("%s: alone %v, in a job %v", sub, err, jobErr)
			continue
		}
		if err != nil {
			if d := cmp.Diff(reasonOf(jobErr), reasonOf(err)); d != "" {
				t.Errorf("%s: reasons (-in a job +alone):\n%s", sub, d)
			}
			continue
		}
		if d := cmp.Diff(fromJob.Subscription, alone); d != "" {
			t.Errorf("%s: subscriptions (-in a job +alone):\n%s", sub, d)
		}
	}
	for _, c := range []struct{ raw, want string }{
		{"{\"endpoint\":\"" + testEndpoint + "\"," + keys + "}\n", ""},
		{`{"endpoint":`, "subscription: not valid JSON at byte 12: unexpected end of JSON input"},
		{`{"endpoint":"x"} {}`, "subscription: not valid JSON at byte 18: invalid character '{' after top-level value"},
		{"  {\"endpoint\":\"" + testEndpoint + "\xff\"," + keys + "}", "subscription.endpoint: not valid UTF-8 at byte 69"}, // 2 + 13 + the 54 bytes of the endpoint
		{`{"endpoint":"` + strings.Repeat("x", MaxEntryBytes) + `"}`, fmt.Sprintf("subscription: is %d bytes; at most %d", MaxEntryBytes+15, MaxEntryBytes)},
	} {
		_, err := DecodeSubscription([]byte(c.raw))
		if got := reasonOf(err); got != c.want {
			t.Errorf("DecodeSubscription(%.40q): %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestRules(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string // "" for none
	}{
		{"each urgency", errors.Join(CheckUrgency("very-low"), CheckUrgency("low"), CheckUrgency("normal"), CheckUrgency("high")), ""},
		{"unknown urgency", CheckUrgency("urgent"), "must be one of very-low, low, normal, high"},
		{"no urgency is none of them", CheckUrgency(""), "must be one of very-low, low, normal, high"},
		{"topic of 32", CheckTopic(strings.Repeat("a", MaxTopicLen)), ""},
		{"topic of the whole alphabet", CheckTopic("AZaz09-_"), ""},
		{"topic of 33", CheckTopic(strings.Repeat("a", MaxTopicLen+1)), "must be 1 to 32 characters of the URL-safe base64 alphabet"},
		{"empty topic", CheckTopic(""), "must be 1 to 32 characters of the URL-safe base64 alphabet"},
		{"topic with a space", CheckTopic("a b"), "must be 1 to 32 characters of the URL-safe base64 alphabet"},
		{"topic in standard base64", CheckTopic("a+b/"), "must be 1 to 32 characters of the URL-safe base64 alphabet"},
		{"payload that fits", CheckPayload(3993), ""},
		{"payload one byte over", CheckPayload(3994), "is 3994 bytes; at most 3993 (one 4096-byte aes128gcm body)"},
	} {
		got := ""
		if c.err != nil {
			got = c.err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if MaxCiphertext != MaxBodyWNS || MaxBody != 4096 || MaxBodyWNS != 5000 || MaxPayload != 3993 {
		t.Errorf("body sizes %d %d %d %d, want 4096, WNS 5000, a ciphertext up to WNS's, a payload of 3993",
			MaxBody, MaxBodyWNS, MaxCiphertext, MaxPayload)
	}
}

// TestEndpointReason: what the registry refuses is named without the endpoint.
func TestEndpointReason(t *testing.T) {
	reg, err := providers.Parse("registry.yaml", []byte("version: 1\nproviders:\n  - id: fallback\n    kind: generic\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ endpoint, want string }{
		{"http://push.example/SECRET", "subscription.endpoint: not https"},
		{"https://user@push.example/SECRET", "subscription.endpoint: bad endpoint: user information in the URL"},
		{"https://push.example:99999/SECRET", "subscription.endpoint: bad endpoint: port out of range"},
	} {
		_, err := reg.Resolve(c.endpoint)
		if err == nil {
			t.Fatalf("Resolve(%s) routed it", c.endpoint)
		}
		if got := EndpointReason(err); got != c.want || strings.Contains(got, "SECRET") {
			t.Errorf("EndpointReason for %s = %q, want %q", c.endpoint, got, c.want)
		}
	}
}

func reasonOf(err error) string {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Reason
	}
	if err != nil {
		return "not an InvalidError: " + err.Error()
	}
	return ""
}

// TestSubscriptionMarshalsAsToJSON: a Subscription marshals as the browser's
// PushSubscription.toJSON() does, and decodes back to itself.
func TestSubscriptionMarshalsAsToJSON(t *testing.T) {
	sub := Subscription{Endpoint: testEndpoint, Keys: Keys{P256dh: testP256dh, Auth: testAuth}}
	b, err := json.Marshal(sub)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"endpoint":"` + testEndpoint + `","expirationTime":null,"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
	if string(b) != want {
		t.Errorf("marshalled %s\nwant      %s", b, want)
	}
	back, err := DecodeSubscription(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sub, back); d != "" {
		t.Errorf("decoded back (-marshalled +decoded):\n%s", d)
	}
}

// FuzzDecodeSubscription: DecodeSubscription never panics, refuses only with a reason that
// quotes no endpoint, accepts only what keeps the limits, and accepts a JSON value exactly
// when Decode accepts it as a job's subscription.
func FuzzDecodeSubscription(f *testing.F) {
	keys := `"keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}`
	f.Add([]byte(`{"endpoint":"` + testEndpoint + `",` + keys + `}`))
	f.Add([]byte(`{"endpoint":"` + testEndpoint + `","expirationTime":null,` + keys + `,"x":1}`))
	f.Add([]byte(`{"endpoint":"http://h/SECRET",` + keys + `}`))
	f.Add([]byte(" {\"endpoint\":\"https://h/SECRET\xff\"} "))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sub, err := DecodeSubscription(raw)
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("error %v is not an InvalidError with a reason", err)
			}
			var lenient struct {
				Endpoint string `json:"endpoint"`
			}
			_ = json.Unmarshal(raw, &lenient)
			if ep := lenient.Endpoint; len(ep) >= 8 && strings.Contains(ep, "/") && !strings.Contains(ie.Reason, `field "`) && strings.Contains(ie.Reason, ep) {
				t.Fatalf("reason quotes the endpoint: %s", ie.Reason)
			}
		} else if sub.Endpoint == "" || len(sub.Endpoint) > MaxEndpointLen {
			t.Fatal("accepted a bad endpoint")
		}
		if json.Valid(raw) && len(raw) < MaxEntryBytes-64 {
			_, jobErr := Decode(append(append([]byte(`{"id":"a","subscription":`), bytes.TrimSpace(raw)...), '}'), t0)
			if (err == nil) != (jobErr == nil) {
				t.Fatalf("alone: %v; as a job's subscription: %v", err, jobErr)
			}
		}
	})
}
