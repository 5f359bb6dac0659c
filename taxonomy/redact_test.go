package taxonomy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

const (
	fcmToken    = "dpH5lCsTSSM:APA91bHqjZxM0VImWWqDRN7U0a3AycjUf4O-byuxb_wJsKRaKvV_iKw56s16ekq6FUqoCF7k2nqVJw6"
	fcmEndpoint = "https://fcm.googleapis.com/fcm/send/" + fcmToken
	wnsToken    = "BQYAAABexample%2b%2fAAAA%3d"
	wnsEndpoint = "https://wns2-par02p.notify.windows.com/w/?token=" + wnsToken
)

// manySegments is an endpoint with more long segments than Redact takes one by one.
var manySegments = "https://h" + strings.Repeat("/segment-of-a-made-up-path", 100)

func TestRedact(t *testing.T) {
	tests := []struct {
		name, endpoint, text, want string
	}{
		{"the path echoed", fcmEndpoint, "no such subscription /fcm/send/" + fcmToken + ", sorry",
			"no such subscription <redacted>, sorry"},
		{"the whole endpoint", fcmEndpoint, `Post "` + fcmEndpoint + `": EOF`, `Post "<redacted>": EOF`},
		{"the token alone", fcmEndpoint, "registration " + fcmToken + " is not registered",
			"registration <redacted> is not registered"},
		{"the token's halves are segments of nothing: kept whole or not at all", fcmEndpoint,
			"token " + fcmToken[:20], "token " + fcmToken[:20]},
		{"short segments are the service's words", fcmEndpoint, "fcm send failed", "fcm send failed"},
		{"a query value as written", wnsEndpoint, "bad channel " + wnsToken + "!", "bad channel <redacted>!"},
		{"the query", wnsEndpoint, "bad channel token=" + wnsToken, "bad channel <redacted>"},
		{"a query value decoded", wnsEndpoint, "bad channel BQYAAABexample+/AAAA=", "bad channel <redacted>"},
		{"the path and query", wnsEndpoint, "not found: /w/?token=" + wnsToken, "not found: <redacted>"},
		{"a segment decoded", "https://push.example.net/push/abc%2Fdefghij%3Akl", "no abc/defghij:kl here", "no <redacted> here"},
		{"a fragment", "https://push.example.net/p#frag-ment-01", "frag-ment-01?", "<redacted>?"},
		{"an endpoint that is no URL", "not a url/with-a-long-secret", "quoted with-a-long-secret", "quoted <redacted>"},
		{"an endpoint without a path", "https://push.example.net", "push.example.net said no", "push.example.net said no"},
		{"an endpoint of many long segments: the whole path still goes", manySegments, "gone: " + manySegments[len("https://h"):],
			"gone: <redacted>"},
		{"every occurrence", fcmEndpoint, fcmToken + " and " + fcmToken, "<redacted> and <redacted>"},
		{"no endpoint", "", "no such subscription /fcm/send/" + fcmToken, "no such subscription /fcm/send/" + fcmToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, taxonomy.SecretsOf(tc.endpoint).Redact(tc.text)); d != "" {
				t.Errorf("Redact (-want +got):\n%s", d)
			}
		})
	}
	if got := (taxonomy.Secrets{}).Redact("/fcm/send/" + fcmToken); got != "/fcm/send/"+fcmToken {
		t.Errorf("the zero Secrets redacted %q", got)
	}
}

// TestSecretsOutcomes: ClassifyAt and Local through the Secrets of an endpoint keep every part
// of it out of the detail, including a token that straddles the 256-byte cut (redacted before
// the cut, it cannot leave its first half) and the URL a *url.Error quotes.
func TestSecretsOutcomes(t *testing.T) {
	secrets := taxonomy.SecretsOf(fcmEndpoint)
	straddling := strings.Repeat("x", 230) + " /fcm/send/" + fcmToken
	urlErr := &url.Error{Op: "Post", URL: fcmEndpoint, Err: io.ErrUnexpectedEOF}
	tests := []struct {
		name string
		out  taxonomy.Outcome
		want string
	}{
		{"an answer echoing the path", secrets.ClassifyAt(fixedNow, "generic", 404, nil, []byte("no such subscription /fcm/send/"+fcmToken)),
			"no such subscription <redacted>"},
		{"a token across the cut", secrets.ClassifyAt(fixedNow, "generic", 400, nil, []byte(straddling)),
			strings.Repeat("x", 230) + " <redacted>"},
		{"a header echoing the token", secrets.ClassifyAt(fixedNow, "wns", 404, http.Header{"X-Wns-Error-Description": {"channel " + fcmToken + " not found"}}, nil),
			"channel <redacted> not found"},
		{"a url.Error", secrets.Local("fcm", taxonomy.TransportError, urlErr.Error()), `Post "<redacted>": unexpected EOF`},
		{"a local refusal", secrets.Local("fcm", taxonomy.InvalidRequest, fmt.Sprintf("endpoint %s refused", fcmEndpoint)), "endpoint <redacted> refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.out.Detail); d != "" {
				t.Errorf("detail (-want +got):\n%s", d)
			}
			checkDetail(t, tc.out.Detail)
			for i := 0; i+8 <= len(fcmToken); i++ {
				if strings.Contains(tc.out.Detail, fcmToken[i:i+8]) {
					t.Fatalf("detail %q holds %q of the token", tc.out.Detail, fcmToken[i:i+8])
				}
			}
		})
	}
	// Without the endpoint a token across the cut leaves its first half: what Secrets are for.
	if d := taxonomy.ClassifyAt(fixedNow, "generic", 400, nil, []byte(straddling)).Detail; !strings.Contains(d, fcmToken[:8]) {
		t.Errorf("without Secrets the detail is %q; the case above proves nothing if it has no token", d)
	}
}

// FuzzRedact: for any endpoint and text, Redact and the outcomes made through the endpoint's
// Secrets never panic and hold no path segment or query value of 8 bytes or more (those that
// could be made of the marker itself, or changed by the detail's cleaning, aside).
func FuzzRedact(f *testing.F) {
	f.Add(fcmEndpoint, "no such subscription /fcm/send/"+fcmToken)
	f.Add(wnsEndpoint, "token=BQYAAABexample+/AAAA= is bad")
	f.Add("https://push.example.net/a%zz/bcdefghijk?x=12345678&y", "bcdefghijk 12345678 %zz")
	f.Add("https://h/redacted", "redacted <redacted>")
	f.Add("https://h/"+strings.Repeat("t", 300), strings.Repeat("x", 250)+" "+strings.Repeat("t", 300))
	f.Add("", "anything")
	f.Fuzz(func(t *testing.T, endpoint, text string) {
		s := taxonomy.SecretsOf(endpoint)
		red := s.Redact(text)
		local := s.Local("fcm", taxonomy.TransportError, text).Detail
		answer := s.ClassifyAt(fixedNow, "generic", 400, nil, []byte(text)).Detail
		checkDetail(t, local)
		checkDetail(t, answer)
		path := endpoint
		if i := strings.Index(endpoint, "://"); i >= 0 {
			path = endpoint[i+3:]
			if j := strings.IndexAny(path, "/?#"); j >= 0 {
				path = path[j:]
			} else {
				path = ""
			}
		}
		path, fragment, _ := strings.Cut(path, "#")
		path, query, _ := strings.Cut(path, "?")
		parts := append(strings.Split(path, "/"), fragment)
		for pair := range strings.SplitSeq(query, "&") {
			_, v, _ := strings.Cut(pair, "=")
			parts = append(parts, v)
		}
		for _, part := range parts {
			if len(part) < 8 || strings.Contains(taxonomy.Redacted, part) || strings.ContainsAny(part, "<>") ||
				strings.ContainsFunc(part, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
				continue
			}
			if strings.Contains(red, part) {
				t.Fatalf("Redact(%q) = %q holds %q", text, red, part)
			}
			if strings.Contains(local, part) || strings.Contains(answer, part) {
				t.Fatalf("details %q, %q hold %q", local, answer, part)
			}
		}
	})
}
