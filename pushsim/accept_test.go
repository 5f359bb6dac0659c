package pushsim_test

import (
	"crypto/tls"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// cmpDelivery ignores what a test cannot know in advance: the sequence number and the raw
// request (headers and body are checked where they matter).
var cmpDelivery = cmpopts.IgnoreFields(pushsim.Delivery{}, "Seq", "Header", "Body")

func TestAcceptEveryProvider(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	tests := []struct {
		provider   string
		host       string // "" default
		endpoint   *regexp.Regexp
		wantStatus int
		wantHeader map[string]*regexp.Regexp
	}{
		{"fcm", "", regexp.MustCompile(`^https://fcm\.googleapis\.com/fcm/send/[A-Za-z0-9_-]{11}:APA91b[A-Za-z0-9_-]{134}$`), 201,
			map[string]*regexp.Regexp{"Location": regexp.MustCompile(`^https://fcm\.googleapis\.com/0:\d+%7e[0-9a-f]{8}$`)}},
		{"autopush", "", regexp.MustCompile(`^https://updates\.push\.services\.mozilla\.com/wpush/v2/gAAAAAB[A-Za-z0-9_-]{200,}$`), 201,
			map[string]*regexp.Regexp{"Location": regexp.MustCompile(`^https://updates\.push\.services\.mozilla\.com/m/`), "Ttl": regexp.MustCompile(`^60$`)}},
		{"apple", "", regexp.MustCompile(`^https://web\.push\.apple\.com/[A-Za-z0-9_-]{100,}$`), 201,
			map[string]*regexp.Regexp{"Apns-Id": regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$`)}},
		{"wns", "", regexp.MustCompile(`^https://wns2-par02p\.notify\.windows\.com/w/\?token=[A-Za-z0-9%]+%3d%3d$`), 201,
			map[string]*regexp.Regexp{"X-Wns-Status": regexp.MustCompile(`^received$`), "X-Wns-Msg-Id": regexp.MustCompile(`^[0-9A-F]{16}$`)}},
		{"wns", "wns2-db5p.notify.windows.com", regexp.MustCompile(`^https://wns2-db5p\.notify\.windows\.com/w/\?token=.*%2b.*$`), 201, nil},
		{"generic", "", regexp.MustCompile(`^https://push\.example\.net/push/[A-Za-z0-9_-]{43}$`), 201,
			map[string]*regexp.Regexp{"Location": regexp.MustCompile(`^https://push\.example\.net/m/\d+$`)}},
		{"generic", "push.example.org:8443", regexp.MustCompile(`^https://push\.example\.org:8443/push/`), 201,
			map[string]*regexp.Regexp{"Location": regexp.MustCompile(`^https://push\.example\.org:8443/m/\d+$`)}},
	}
	for _, tc := range tests {
		t.Run(tc.provider+"/"+tc.host, func(t *testing.T) {
			sub := subscribe(t, s, tc.provider, tc.host, app)
			if !tc.endpoint.MatchString(sub.Endpoint) {
				t.Fatalf("endpoint %q does not match %s", sub.Endpoint, tc.endpoint)
			}
			text := "hello " + tc.provider + " ✓"
			req := pushRequest(t, app, sub, []byte(text))
			req.Header.Set("Urgency", "high")
			req.Header.Set("Topic", "news")
			req.Header.Set("X-Job-Id", "job-1")
			got := do(t, c, req)
			if got.status != tc.wantStatus {
				t.Fatalf("status = %d (%q), want %d", got.status, got.body, tc.wantStatus)
			}
			for k, re := range tc.wantHeader {
				if v := got.header.Get(k); !re.MatchString(v) {
					t.Errorf("header %s = %q, want %s", k, v, re)
				}
			}
			ds := s.DeliveriesFor(sub.Endpoint)
			if len(ds) == 1 {
				assertClassified(t, tc.provider, got, ds[0])
			}
			u, _ := url.Parse(sub.Endpoint)
			want := []pushsim.Delivery{{
				Provider: tc.provider, Host: u.Host, Endpoint: sub.Endpoint, Status: tc.wantStatus, Code: "ACCEPTED",
				Answer:    acceptedFixture(tc.provider),
				Plaintext: []byte(text),
				Claims:    pushsim.Claims{Aud: "https://" + u.Host, Exp: testNow.Add(12 * 3600e9).Unix(), Sub: testSubject},
				TTL:       60, Urgency: "high", Topic: "news", JobID: "job-1", At: testNow, Proto: "HTTP/2.0",
			}}
			if diff := cmp.Diff(want, ds, cmpDelivery); diff != "" {
				t.Fatalf("deliveries (-want +got):\n%s", diff)
			}
			if got := ds[0].Header.Get("Authorization"); !strings.HasSuffix(got, ", k="+app.pub) {
				t.Errorf("recorded Authorization = %q", got)
			}
		})
	}
}

func acceptedFixture(provider string) string {
	switch provider {
	case "autopush", "generic":
		return provider + "/accepted-201"
	}
	return provider + "/accepted"
}

func TestAcceptDefaults(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	tests := []struct {
		name        string
		provider    string
		ttl         string
		body        bool
		wantTTL     int
		wantRespTTL string // TTL response header ("" none)
	}{
		{"autopush clamps TTL to 30 days and says so", "autopush", "99999999", true, 2_592_000, "2592000"},
		{"autopush TTL past int32 clamps too", "autopush", "99999999999999999999", true, 2_592_000, "2592000"},
		{"fcm clamps TTL to 4 weeks", "fcm", "99999999", true, 2_419_200, ""},
		{"apple keeps TTL", "apple", "99999999", true, 99_999_999, ""},
		{"TTL 0", "fcm", "0", true, 0, ""},
		{"a push without payload is a tickle", "autopush", "60", false, 60, "60"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub := subscribe(t, s, tc.provider, "", app)
			req := pushRequest(t, app, sub, []byte("x"))
			if !tc.body {
				req = rawPush(t, sub.Endpoint, app.authorization(t, sub.Endpoint), nil)
				req.Header.Del("Content-Encoding")
			}
			req.Header.Set("TTL", tc.ttl)
			got := do(t, c, req)
			if got.status != 201 || got.header.Get("TTL") != tc.wantRespTTL {
				t.Fatalf("status %d, TTL header %q; want 201, %q", got.status, got.header.Get("TTL"), tc.wantRespTTL)
			}
			d := s.DeliveriesFor(sub.Endpoint)[0]
			if d.TTL != tc.wantTTL || d.Urgency != "normal" {
				t.Errorf("TTL %d, urgency %q; want %d, normal", d.TTL, d.Urgency, tc.wantTTL)
			}
			if !tc.body && d.Plaintext != nil {
				t.Errorf("tickle recorded plaintext %q", d.Plaintext)
			}
		})
	}
}

func TestHTTP1(t *testing.T) {
	s := start(t, pushsim.Config{})
	c := client(t, s, clientOptions{http1: true})
	app := newAppServer(t)
	for _, p := range pushsim.Providers() {
		t.Run(p, func(t *testing.T) {
			sub := subscribe(t, s, p, "", app)
			if got := do(t, c, pushRequest(t, app, sub, []byte("over h1"))); got.status/100 != 2 {
				t.Fatalf("status = %d (%q), want 2xx", got.status, got.body)
			}
			d := s.DeliveriesFor(sub.Endpoint)[0]
			if d.Proto != "HTTP/1.1" || string(d.Plaintext) != "over h1" {
				t.Fatalf("proto %q plaintext %q, want HTTP/1.1 and the payload", d.Proto, d.Plaintext)
			}
		})
	}
}

// An endpoint on an IP address gets a certificate with an IP SAN; no connect-to is needed.
func TestIPHost(t *testing.T) {
	s := start(t, pushsim.Config{})
	app := newAppServer(t)
	sub := subscribe(t, s, "generic", s.Addr(), app)
	tr := &http.Transport{TLSClientConfig: tlsConfig(s), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	got := do(t, &http.Client{Transport: tr}, pushRequest(t, app, sub, []byte("by IP")))
	if got.status != 201 {
		t.Fatalf("status = %d (%q), want 201", got.status, got.body)
	}
	if d := s.DeliveriesFor(sub.Endpoint); len(d) != 1 || d[0].Claims.Aud != "https://"+s.Addr() {
		t.Fatalf("deliveries = %+v", d)
	}
}

func TestWNSRawURI(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	sub := subscribe(t, s, "wns", "", app)
	raw := strings.TrimPrefix(sub.Endpoint, "https://wns2-par02p.notify.windows.com/w/?token=")
	token, err := url.QueryUnescape(raw)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		endpoint   string
		wantStatus int
	}{
		{"as given", sub.Endpoint, 201},
		{"re-encoded upper case", "https://wns2-par02p.notify.windows.com/w/?" + url.Values{"token": {token}}.Encode(), 404},
		{"decoded", "https://wns2-par02p.notify.windows.com/w/?token=" + token, 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.endpoint == sub.Endpoint && tc.wantStatus != 201 {
				t.Fatal("test endpoint equals the real one")
			}
			got := do(t, c, rawPush(t, tc.endpoint, app.authorization(t, sub.Endpoint), encrypt(t, sub, []byte("x"))))
			if got.status != tc.wantStatus {
				t.Fatalf("status = %d, want %d", got.status, tc.wantStatus)
			}
			if tc.wantStatus == 404 && got.header.Get("X-WNS-Error-Description") != "The channel URI is not valid" {
				t.Errorf("404 without the WNS not-found shape: %v", got.header)
			}
		})
	}
}

func tlsConfig(s *pushsim.Server) *tls.Config { return &tls.Config{RootCAs: s.CertPool()} }

// FCM serves every token under /fcm/send/ (what browsers hand out) and /wp/.
func TestFCMWpPath(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	sub := subscribe(t, s, "fcm", "", app)
	wp := strings.Replace(sub.Endpoint, "/fcm/send/", "/wp/", 1)
	got := do(t, c, rawPush(t, wp, app.authorization(t, sub.Endpoint), encrypt(t, sub, []byte("via /wp/"))))
	if got.status != 201 {
		t.Fatalf("status = %d (%q), want 201", got.status, got.body)
	}
	if d := s.DeliveriesFor(sub.Endpoint); len(d) != 1 || string(d[0].Plaintext) != "via /wp/" {
		t.Fatalf("deliveries = %+v", d)
	}
}
