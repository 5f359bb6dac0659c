package job

import (
	"errors"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

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
