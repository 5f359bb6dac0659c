package taxonomy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// FuzzClassify throws arbitrary answers at every table: it must never panic, and every outcome
// must keep the invariants (valid code, Retryable from the code, status class rules, a short
// valid UTF-8 detail without control characters, Retry-After within a day).
func FuzzClassify(f *testing.F) {
	for _, fx := range fixtures.All() {
		kind := uint8(0)
		for i, k := range kinds {
			if k == fx.Provider {
				kind = uint8(i)
			}
		}
		h := fx.Header()
		f.Add(kind, fx.Status, h.Get("Retry-After"), h.Get("X-WNS-Status"), h.Get("X-WNS-Error-Description"), []byte(fx.Body))
	}
	f.Add(uint8(1), 301, "", "", "", []byte(`{"errno": 1e400}`))
	f.Add(uint8(0), 403, "-1", "", "", []byte("https://fcm.googleapis.com/wp/\xff\x00secret"))
	f.Add(uint8(3), 400, "Wed, 21 Oct 2026 07:28:45 GMT", "channelthrottled", "TTL\x00", []byte(nil))

	now := time.Date(2026, 10, 21, 7, 28, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, kind uint8, status int, retryAfter, wnsStatus, wnsDesc string, body []byte) {
		provider := kinds[int(kind)%len(kinds)]
		h := http.Header{
			"Retry-After":             {retryAfter},
			"X-Wns-Status":            {wnsStatus},
			"X-Wns-Error-Description": {wnsDesc},
		}
		o := taxonomy.ClassifyAt(now, provider, status, h, body)
		if msg := invariantViolation(status, o); msg != "" {
			t.Fatalf("%s: %+v", msg, o)
		}
		if strings.ContainsFunc(o.Detail, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Fatalf("detail has control characters: %q", o.Detail)
		}
		if o.Status != status || o.Provider != provider {
			t.Fatalf("status, provider = %d, %q; want %d, %q", o.Status, o.Provider, status, provider)
		}
	})
}
