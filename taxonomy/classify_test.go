package taxonomy_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// fixedNow is the clock for fixtures that do not pin one: only an HTTP-date Retry-After reads it.
var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// kinds are the classifier tables, plus a registry id that must fall through to generic.
var kinds = []string{"fcm", "autopush", "apple", "wns", "generic", "fallback"}

type verdict struct {
	Code       taxonomy.Code
	Retryable  bool
	RetryAfter time.Duration
}

// TestFixtures classifies every recorded answer of every push service: one subtest per row of
// docs/providers.md.
func TestFixtures(t *testing.T) {
	all := fixtures.All()
	if len(all) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range all {
		t.Run(f.Provider+"/"+f.Name, func(t *testing.T) {
			now := f.Clock()
			if now.IsZero() {
				now = fixedNow
			}
			o := taxonomy.ClassifyAt(now, f.Provider, f.Status, f.Header(), []byte(f.Body))

			want := verdict{
				Code:       taxonomy.Code(f.Want.Code),
				Retryable:  f.Want.Retryable,
				RetryAfter: time.Duration(f.Want.RetryAfterSeconds) * time.Second,
			}
			got := verdict{Code: o.Code, Retryable: o.Retryable, RetryAfter: o.RetryAfter}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s (row %q): outcome mismatch (-want +got):\n%s", f.Name, f.Row, diff)
			}
			if !strings.Contains(o.Detail, f.Want.DetailContains) {
				t.Errorf("detail %q does not contain %q", o.Detail, f.Want.DetailContains)
			}
			if o.Status != f.Status || o.Provider != f.Provider {
				t.Errorf("status, provider = %d, %q; want %d, %q", o.Status, o.Provider, f.Status, f.Provider)
			}
			checkDetail(t, o.Detail)
		})
	}
}

// documented4xx is, per table, what a 4xx means when the body says nothing: docs/providers.md's
// tables restated, so that a change to the package's tables has to be made here too.
var documented4xx = map[string]map[int]taxonomy.Code{
	"fcm": {
		400: taxonomy.InvalidRequest, 401: taxonomy.Unauthorized, 403: taxonomy.Unauthorized,
		404: taxonomy.Gone, 410: taxonomy.Gone, 413: taxonomy.PayloadTooLarge,
	},
	"autopush": {
		400: taxonomy.InvalidRequest, 401: taxonomy.Unauthorized,
		404: taxonomy.Gone, 410: taxonomy.Gone, 413: taxonomy.PayloadTooLarge,
	},
	"apple": {
		400: taxonomy.InvalidRequest, 403: taxonomy.Unauthorized,
		404: taxonomy.Gone, 410: taxonomy.Gone, 413: taxonomy.PayloadTooLarge,
	},
	"wns": {
		400: taxonomy.InvalidRequest, 401: taxonomy.Unauthorized, 403: taxonomy.KeyMismatch,
		404: taxonomy.Gone, 405: taxonomy.InvalidRequest, 406: taxonomy.RateLimited,
		410: taxonomy.Gone, 413: taxonomy.PayloadTooLarge,
	},
	"generic": {
		400: taxonomy.InvalidRequest, 401: taxonomy.Unauthorized, 403: taxonomy.Unauthorized,
		404: taxonomy.Gone, 410: taxonomy.Gone, 413: taxonomy.PayloadTooLarge,
	},
}

// wantForStatus is the code an answer with no body must get.
func wantForStatus(kind string, status int) taxonomy.Code {
	table, ok := documented4xx[kind]
	if !ok {
		table = documented4xx["generic"]
	}
	switch {
	case status < 200, status >= 300 && status < 400:
		return taxonomy.InvalidRequest
	case status < 300:
		return taxonomy.Accepted
	case status == 429:
		return taxonomy.RateLimited
	case status >= 500:
		return taxonomy.ProviderDown
	case table[status] != "":
		return table[status]
	}
	return taxonomy.InvalidRequest
}

// TestEveryStatus walks every status from 100 to 599 through every table with a bare answer
// carrying only Retry-After.
func TestEveryStatus(t *testing.T) {
	h := http.Header{"Retry-After": {"7"}}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			for status := 100; status <= 599; status++ {
				o := taxonomy.ClassifyAt(fixedNow, kind, status, h, nil)
				c := wantForStatus(kind, status)
				want := verdict{Code: c, Retryable: c.Retryable(), RetryAfter: 7 * time.Second}
				got := verdict{Code: o.Code, Retryable: o.Retryable, RetryAfter: o.RetryAfter}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("status %d (-want +got):\n%s", status, diff)
				}
				informational, redirect := status < 200, status >= 300 && status < 400
				if (informational || redirect) && !strings.Contains(o.Detail, "status") {
					t.Errorf("status %d: detail %q does not say what was unexpected", status, o.Detail)
				}
			}
		})
	}
}

// TestStatusInvariants sends every fixture's body and headers with every status through its
// table: whatever a body says, the status class rules hold.
func TestStatusInvariants(t *testing.T) {
	byKind := map[string][]fixtures.Fixture{}
	for _, f := range fixtures.All() {
		byKind[f.Provider] = append(byKind[f.Provider], f)
	}
	byKind["fallback"] = byKind["generic"]
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			for _, f := range byKind[kind] {
				for status := 100; status <= 599; status++ {
					o := taxonomy.ClassifyAt(fixedNow, kind, status, f.Header(), []byte(f.Body))
					if msg := invariantViolation(status, o); msg != "" {
						t.Errorf("fixture %s, status %d: %s (outcome %+v)", f.Name, status, msg, o)
					}
				}
			}
		})
	}
}

// invariantViolation says which rule o breaks for status, or "".
func invariantViolation(status int, o taxonomy.Outcome) string {
	switch {
	case o.Code == "" || !o.Code.Valid():
		return "invalid code"
	case o.Retryable != o.Code.Retryable():
		return "Retryable differs from Code.Retryable"
	case len(o.Detail) > 256:
		return "detail over 256 bytes"
	case !utf8.ValidString(o.Detail):
		return "detail is not valid UTF-8"
	case o.RetryAfter < 0 || o.RetryAfter > 24*time.Hour:
		return "retry-after out of range"
	case status >= 200 && status < 300 && o.Code != taxonomy.Accepted:
		return "2xx not ACCEPTED"
	case status == 429 && o.Code != taxonomy.RateLimited:
		return "429 not RATE_LIMITED"
	case (status < 100 || status >= 500) && o.Code != taxonomy.ProviderDown:
		return "5xx or invalid status not PROVIDER_DOWN"
	case (status >= 100 && status < 200 || status >= 300 && status < 400) && o.Code != taxonomy.InvalidRequest:
		return "1xx/3xx not INVALID_REQUEST"
	case status >= 400 && status < 500 && o.Code == taxonomy.Accepted:
		return "4xx ACCEPTED"
	case status >= 400 && status < 500 && o.Retryable && o.Code != taxonomy.RateLimited:
		return "4xx retryable but not RATE_LIMITED"
	}
	return ""
}

// checkDetail asserts what every detail must be: short, valid UTF-8, one line.
func checkDetail(t *testing.T, d string) {
	t.Helper()
	if len(d) > 256 || !utf8.ValidString(d) || strings.ContainsAny(d, "\r\n\t\x00") {
		t.Errorf("detail %q: over 256 bytes, invalid UTF-8 or has control characters", d)
	}
}

// TestClassifyEdges pins the answers no fixture records: the rules around the tables.
func TestClassifyEdges(t *testing.T) {
	type tc struct {
		name     string
		provider string
		status   int
		header   http.Header
		body     string
		want     taxonomy.Code
		detail   string // exact detail
	}
	html502 := "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n" +
		"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	tests := []tc{
		{
			name: "redirect is not followed and its Location is not kept", provider: "autopush", status: 301,
			header: http.Header{"Location": {"https://updates.push.services.mozilla.com/wpush/v2/secret"}},
			want:   taxonomy.InvalidRequest, detail: "redirect status 301 not followed",
		},
		{
			name: "final 1xx", provider: "generic", status: 103,
			want: taxonomy.InvalidRequest, detail: "unexpected informational status 103",
		},
		{
			name: "status below 100 is handled like a 5xx", provider: "fcm", status: 0,
			want: taxonomy.ProviderDown, detail: "invalid HTTP status 0",
		},
		{
			name: "status above 599 keeps the body", provider: "generic", status: 999, body: "oops",
			want: taxonomy.ProviderDown, detail: "invalid HTTP status 999: oops",
		},
		{
			name: "5xx wins over a body naming a 4xx errno", provider: "autopush", status: 503,
			body: `{"code":503,"errno":104,"message":"too big"}`,
			want: taxonomy.ProviderDown, detail: "errno 104: too big",
		},
		{
			name: "4xx never becomes an outage, whatever the errno", provider: "autopush", status: 400,
			body: `{"code":400,"errno":999,"message":"An unexpected server error occurred."}`,
			want: taxonomy.InvalidRequest, detail: "errno 999: An unexpected server error occurred.",
		},
		{
			name: "autopush errno 106 on a 400 is the bridge's fault, not a dead subscription", provider: "autopush", status: 400,
			body: `{"code":400,"errno":106,"error":"Bad Request","message":"User has invalid app ID fenix-x"}`,
			want: taxonomy.InvalidRequest, detail: "errno 106: User has invalid app ID fenix-x",
		},
		{
			name: "self-hosted autopush errno 106 on a 400 is not GONE either", provider: "fallback", status: 400,
			body: `{"code":400,"errno":106,"error":"Bad Request","message":"User has invalid app ID fenix-x"}`,
			want: taxonomy.InvalidRequest, detail: "errno 106: User has invalid app ID fenix-x",
		},
		{
			name: "an errno meaning gone prunes only with a 404 or 410: else the status decides", provider: "autopush", status: 401,
			body: `{"code":401,"errno":105,"message":"odd"}`,
			want: taxonomy.Unauthorized, detail: "errno 105: odd",
		},
		{
			name: "autopush errno 106 on a 410 is GONE", provider: "autopush", status: 410,
			body: `{"code":410,"errno":106,"error":"Gone","message":"No such subscription"}`,
			want: taxonomy.Gone, detail: "errno 106: No such subscription",
		},
		{
			name: "autopush key mismatch message without errno", provider: "autopush", status: 401,
			body: `{"code":401,"errno":null,"error":"Unauthorized","message":"VAPID public key mismatch"}`,
			want: taxonomy.KeyMismatch, detail: "VAPID public key mismatch",
		},
		{
			name: "autopush behind a proxy answering HTML", provider: "autopush", status: 404,
			body: "<html><body><h1>Not Found</h1></body></html>",
			want: taxonomy.Gone, detail: "Not Found",
		},
		{
			name: "generic reads a self-hosted autopush key mismatch", provider: "fallback", status: 401,
			body: `{"code":401,"errno":109,"error":"Unauthorized","message":"VAPID public key mismatch"}`,
			want: taxonomy.KeyMismatch, detail: "errno 109: VAPID public key mismatch",
		},
		{
			name: "generic keeps a JSON body that is not autopush's", provider: "generic", status: 400,
			body: `{"reason": "BadTtl"}`,
			want: taxonomy.InvalidRequest, detail: `{"reason": "BadTtl"}`,
		},
		{
			name: "generic strips the tags of an HTML page", provider: "generic", status: 502, body: html502,
			want: taxonomy.ProviderDown, detail: "502 Bad Gateway 502 Bad Gateway nginx",
		},
		{
			name: "fcm v1 status without an error code", provider: "fcm", status: 401,
			body: `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
			want: taxonomy.Unauthorized, detail: "UNAUTHENTICATED: Request had invalid authentication credentials.",
		},
		{
			name: "fcm v1 third party auth error", provider: "fcm", status: 401,
			body: `{"error":{"code":401,"message":"Auth error from APNS or Web Push Service","status":"UNAUTHENTICATED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"THIRD_PARTY_AUTH_ERROR"}]}}`,
			want: taxonomy.Unauthorized, detail: "THIRD_PARTY_AUTH_ERROR: Auth error from APNS or Web Push Service",
		},
		{
			name: "fcm v1 unavailable keeps its detail", provider: "fcm", status: 503,
			body: `{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE","details":[{"errorCode":"UNAVAILABLE"}]}}`,
			want: taxonomy.ProviderDown, detail: "UNAVAILABLE: The service is currently unavailable.",
		},
		{
			name: "fcm v1 quota on a 400 still says slow down", provider: "fcm", status: 400,
			body: `{"error":{"status":"RESOURCE_EXHAUSTED","message":"Quota exceeded.","details":[{"errorCode":"QUOTA_EXCEEDED"}]}}`,
			want: taxonomy.RateLimited, detail: "QUOTA_EXCEEDED: Quota exceeded.",
		},
		{
			name: "fcm unknown text maps by status", provider: "fcm", status: 403, body: "Forbidden\nmore",
			want: taxonomy.Unauthorized, detail: "Forbidden",
		},
		{
			name: "apple body that is not JSON", provider: "apple", status: 400, body: "\n\nBad Request\n",
			want: taxonomy.InvalidRequest, detail: "Bad Request",
		},
		{
			name: "apple unknown reason maps by status", provider: "apple", status: 413, body: `{"reason":"SomethingNew"}`,
			want: taxonomy.PayloadTooLarge, detail: "SomethingNew",
		},
		{
			name: "wns throttle description on a 400 is not a TTL", provider: "wns", status: 400,
			header: http.Header{"X-Wns-Status": {"dropped"}, "X-Wns-Error-Description": {"Throttle limit exceeded"}},
			want:   taxonomy.InvalidRequest, detail: "dropped: Throttle limit exceeded",
		},
		{
			name: "wns time-to-live spelled out", provider: "wns", status: 400,
			header: http.Header{"X-Wns-Error-Description": {"Time-To-Live must be positive"}},
			want:   taxonomy.InvalidTTL, detail: "Time-To-Live must be positive",
		},
		{
			name: "wns TTL named on a 404 is still gone", provider: "wns", status: 404,
			header: http.Header{"X-Wns-Error-Description": {"TTL channel not found"}},
			want:   taxonomy.Gone, detail: "TTL channel not found",
		},
		{
			name: "wns channelthrottled on another 4xx", provider: "wns", status: 400,
			header: http.Header{"X-Wns-Status": {"channelthrottled"}},
			want:   taxonomy.RateLimited, detail: "channelthrottled",
		},
		{
			name: "wns domain blocked in other case", provider: "wns", status: 410,
			header: http.Header{"X-Wns-Error-Description": {"domain blocked."}},
			want:   taxonomy.Unauthorized, detail: "domain blocked.",
		},
		{
			name: "wns without its headers keeps the body", provider: "wns", status: 410, body: "expired\n",
			want: taxonomy.Gone, detail: "expired",
		},
		{
			name: "wns 2xx dropped is still accepted and says so", provider: "wns", status: 200,
			header: http.Header{"X-Wns-Status": {"dropped"}},
			want:   taxonomy.Accepted, detail: "dropped",
		},
		{
			name: "provider ids are exact: FCM upper case is generic", provider: "FCM", status: 403,
			body: "the VAPID credentials in the authorization header do not correspond to the credentials used to create the subscriptions.",
			want: taxonomy.Unauthorized,
			detail: "the VAPID credentials in the authorization header do not correspond to the credentials " +
				"used to create the subscriptions.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := taxonomy.ClassifyAt(fixedNow, tt.provider, tt.status, tt.header, []byte(tt.body))
			want := taxonomy.Outcome{
				Code: tt.want, Status: tt.status, Provider: tt.provider,
				Retryable: tt.want.Retryable(), Detail: tt.detail,
			}
			if diff := cmp.Diff(want, o); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDetailIsCleaned pins the detail rules: short, one line, valid UTF-8, no endpoint path.
func TestDetailIsCleaned(t *testing.T) {
	long := strings.Repeat("é", 300) // 600 bytes, two per rune
	tests := []struct {
		name     string
		provider string
		body     string
		want     string
	}{
		{"control characters collapse", "generic", "a\r\n\tb\x00\x1bc\u200bd\ufeff", "a b c d"},
		{"invalid UTF-8 is replaced", "generic", "\xff\xfeok", "\ufffd\ufffdok"},
		{"cut on a rune boundary", "generic", long, strings.Repeat("é", 128)},
		{
			"endpoint path is removed", "generic",
			"no such endpoint https://user:pw@Push.Example.net:8443/wpush/v2/gAAAAsecret?x=1, sorry",
			"no such endpoint https://Push.Example.net:8443/… sorry",
		},
		{"bare origin is kept", "generic", "see http://push.example.net/ or HTTPS://a.b", "see http://push.example.net/ or HTTPS://a.b"},
		{
			"fcm echo of the endpoint", "fcm",
			fixtures.MustGet("fcm", "invalid-endpoint").Body,
			"A valid push subscription endpoint should be specified in the URL as such: https://fcm.googleapis.com/…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := taxonomy.ClassifyAt(fixedNow, tt.provider, 404, nil, []byte(tt.body))
			if diff := cmp.Diff(tt.want, o.Detail); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
			checkDetail(t, o.Detail)
		})
	}
}
