package adapter_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// tokenParts are the runs of 8 characters of an endpoint's path and query: what no detail may
// hold any of. Path words shorter than 8 (fcm, send, wpush, v2, w) are the service's, not the
// subscription's, and are left out.
func tokenParts(t *testing.T, endpoint string) []string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, word := range strings.FieldsFunc(u.RequestURI(), func(r rune) bool { return r == '/' || r == '?' || r == '&' || r == '=' }) {
		for i := 0; i+8 <= len(word); i++ {
			parts = append(parts, word[i:i+8])
		}
	}
	return parts
}

// TestEchoedPathIsRedacted: a push service whose error body quotes the request's path (pushsim's
// echo fault) gets an outcome whose detail keeps its words and holds no part of the token, for
// every provider's endpoint shape (FCM's /fcm/send/<token>, Autopush's /wpush/v2/<token>,
// Apple's /<token>, WNS's /w/?token=<token>, and a generic host's).
func TestEchoedPathIsRedacted(t *testing.T) {
	h := newHarness(t, harnessOptions{registry: []byte(fastRegistry)})
	for _, p := range pushsim.Providers() {
		t.Run(p, func(t *testing.T) {
			h.sim.SetFault(p, pushsim.Fault{Kind: pushsim.Echo, Status: 400})
			defer h.sim.SetFault(p, pushsim.Fault{Kind: pushsim.None})
			sub := h.subscribe(t, p)
			out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60})
			if out.Status != 400 || out.Code != taxonomy.InvalidRequest {
				t.Fatalf("outcome = %+v, want 400 INVALID_REQUEST", out)
			}
			ds := h.sim.DeliveriesFor(sub.Endpoint)
			if len(ds) != 1 || ds[0].Fault != "echo" {
				t.Fatalf("pushsim saw %+v, want one echoed delivery", ds)
			}
			if !strings.HasPrefix(out.Detail, "no such subscription ") || !strings.Contains(out.Detail, taxonomy.Redacted) {
				t.Errorf("detail %q: want the service's words with %s for the path", out.Detail, taxonomy.Redacted)
			}
			for _, part := range tokenParts(t, sub.Endpoint) {
				if strings.Contains(out.Detail, part) {
					t.Fatalf("detail %q holds %q of the endpoint's token", out.Detail, part)
				}
			}
			assertNoSecrets(t, "detail", out.Detail, sub)
		})
	}
}
