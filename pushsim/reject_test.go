package pushsim_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// perProvider names the expected answer of each provider: a fixture name, "plain:<status>"
// for the few answers no fixture holds, or "accept" where that provider lets the request pass.
type perProvider map[string]string

func all(name string) perProvider {
	return perProvider{"fcm": name, "autopush": name, "apple": name, "wns": name, "generic": name}
}

func (p perProvider) with(provider, name string) perProvider {
	q := perProvider{}
	for k, v := range p {
		q[k] = v
	}
	q[provider] = name
	return q
}

// badCase breaks one thing in an otherwise correct push.
type badCase struct {
	name   string
	mutate func(t *testing.T, e *badEnv, req *http.Request) *http.Request
	want   perProvider
}

// badEnv is what a case may use to break a request.
type badEnv struct {
	s     *pushsim.Server
	app   appServer
	other appServer
	sub   job.Subscription
}

func setHeader(k, v string) func(*testing.T, *badEnv, *http.Request) *http.Request {
	return func(_ *testing.T, _ *badEnv, r *http.Request) *http.Request {
		r.Header.Set(k, v)
		return r
	}
}

func delHeader(k string) func(*testing.T, *badEnv, *http.Request) *http.Request {
	return func(_ *testing.T, _ *badEnv, r *http.Request) *http.Request {
		r.Header.Del(k)
		return r
	}
}

// withClaims re-signs the request's JWT (with the subscription's key) over other claims.
func withClaims(f func(c *claims)) func(*testing.T, *badEnv, *http.Request) *http.Request {
	return func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		c := claims{Aud: originOf(t, e.sub.Endpoint), Exp: testNow.Add(12 * time.Hour).Unix(), Sub: testSubject}
		f(&c)
		r.Header.Set("Authorization", "vapid t="+e.app.jwt(t, c)+", k="+e.app.pub)
		return r
	}
}

func withBody(body []byte) func(*testing.T, *badEnv, *http.Request) *http.Request {
	return func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		return rawPush(t, r.URL.String(), r.Header.Get("Authorization"), body)
	}
}

var badCases = []badCase{
	{"GET instead of POST", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		r.Method = http.MethodGet
		r.Body, r.ContentLength = http.NoBody, 0
		return r
	}, perProvider{"fcm": "plain:405", "autopush": "plain:405", "apple": "plain:405", "wns": "method-not-allowed", "generic": "plain:405"}},
	{"unknown endpoint", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		r.URL.RawQuery += "x"
		r.URL.Path += "x"
		return r
	}, perProvider{"fcm": "invalid-endpoint", "autopush": "errno-102", "apple": "bad-path", "wns": "not-found", "generic": "not-found"}},
	{"expired subscription", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		if !e.s.Expire(e.sub.Endpoint) {
			t.Fatal("Expire did not know the endpoint")
		}
		return r
	}, perProvider{"fcm": "unsubscribed", "autopush": "errno-105", "apple": "unregistered", "wns": "expired", "generic": "gone"}},
	{"no Authorization", delHeader("Authorization"),
		perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"legacy WebPush scheme", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		jwt := e.app.jwt(t, claims{Aud: originOf(t, e.sub.Endpoint), Exp: testNow.Add(time.Hour).Unix(), Sub: testSubject})
		r.Header.Set("Authorization", "WebPush "+jwt)
		r.Header.Set("Crypto-Key", "p256ecdsa="+e.app.pub)
		return r
	}, perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-authorization-header", "wns": "unauthorized", "generic": "unauthorized"}},
	{"vapid header plus legacy Crypto-Key", setHeader("Crypto-Key", "p256ecdsa=BAAA"),
		perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-authorization-header", "wns": "unauthorized", "generic": "unauthorized"}},
	{"vapid without k", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		a := r.Header.Get("Authorization")
		r.Header.Set("Authorization", a[:strings.Index(a, ", k=")])
		return r
	}, perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-authorization-header", "wns": "unauthorized", "generic": "unauthorized"}},
	{"k not a P-256 point", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		a := r.Header.Get("Authorization")
		r.Header.Set("Authorization", a[:strings.Index(a, ", k=")]+", k=BAAA"+strings.Repeat("A", 83))
		return r
	}, perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-vapid-public-key-400", "wns": "unauthorized", "generic": "unauthorized"}},
	{"signed by another key than k", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		jwt := e.other.jwt(t, claims{Aud: originOf(t, e.sub.Endpoint), Exp: testNow.Add(time.Hour).Unix(), Sub: testSubject})
		r.Header.Set("Authorization", "vapid t="+jwt+", k="+e.app.pub)
		return r
	}, perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"alg none", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		jwt := e.app.jwtWithHeader(t, `{"typ":"JWT","alg":"none"}`, claims{Aud: originOf(t, e.sub.Endpoint), Exp: testNow.Add(time.Hour).Unix()})
		r.Header.Set("Authorization", "vapid t="+jwt+", k="+e.app.pub)
		return r
	}, perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"subscription made with another key", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		r.Header.Set("Authorization", e.other.authorization(t, e.sub.Endpoint))
		return r
	}, perProvider{"fcm": "key-mismatch", "autopush": "errno-109-key-mismatch", "apple": "vapid-pk-hash-mismatch", "wns": "forbidden", "generic": "forbidden"}},
	{"aud with a trailing slash", withClaims(func(c *claims) { c.Aud += "/" }),
		perProvider{"fcm": "aud-mismatch", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"aud of another service", withClaims(func(c *claims) { c.Aud = "https://push.example.com" }),
		perProvider{"fcm": "aud-mismatch", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"exp in the past", withClaims(func(c *claims) { c.Exp = testNow.Add(-time.Second).Unix() }),
		perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"exp as a string", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		c := map[string]string{"aud": originOf(t, e.sub.Endpoint), "exp": itoa(int(testNow.Add(time.Hour).Unix())), "sub": testSubject}
		r.Header.Set("Authorization", "vapid t="+e.app.jwt(t, c)+", k="+e.app.pub)
		return r
	}, perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"no exp", withClaims(func(c *claims) { c.Exp = 0 }),
		perProvider{"fcm": "unauthorized-registration", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"exp 24h and a second ahead", withClaims(func(c *claims) { c.Exp = testNow.Add(24*time.Hour + time.Second).Unix() }),
		perProvider{"fcm": "exp-too-far", "autopush": "errno-109", "apple": "bad-jwt-token", "wns": "unauthorized", "generic": "unauthorized"}},
	{"exp exactly 24h ahead", withClaims(func(c *claims) { c.Exp = testNow.Add(24 * time.Hour).Unix() }), all("accept")},
	{"sub @localhost", withClaims(func(c *claims) { c.Sub = "mailto:ops@localhost" }), all("accept").with("apple", "bad-jwt-token")},
	{"sub .local", withClaims(func(c *claims) { c.Sub = "https://push.example.local/contact" }), all("accept").with("apple", "bad-jwt-token")},
	{"sub with a space", withClaims(func(c *claims) { c.Sub = "mailto: ops@example.com" }), all("accept").with("apple", "bad-jwt-token")},
	{"sub mailto:mailto:", withClaims(func(c *claims) { c.Sub = "mailto:mailto:ops@example.com" }), all("accept").with("apple", "bad-jwt-token")},
	{"no sub", withClaims(func(c *claims) { c.Sub = "" }), all("accept").with("apple", "bad-jwt-token")},
	{"sub null", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		c := map[string]any{"aud": originOf(t, e.sub.Endpoint), "exp": testNow.Add(time.Hour).Unix(), "sub": nil}
		r.Header.Set("Authorization", "vapid t="+e.app.jwt(t, c)+", k="+e.app.pub)
		return r
	}, all("accept").with("apple", "bad-jwt-token")},
	{"https sub", withClaims(func(c *claims) { c.Sub = "https://gateway.example.com/contact" }), all("accept")},
	{"no TTL", delHeader("TTL"),
		perProvider{"fcm": "plain:400", "autopush": "errno-111", "apple": "bad-ttl", "wns": "bad-ttl", "generic": "bad-request"}},
	{"TTL not digits", setHeader("TTL", "1.5"),
		perProvider{"fcm": "plain:400", "autopush": "errno-112", "apple": "bad-ttl", "wns": "bad-ttl", "generic": "bad-request"}},
	{"TTL negative", setHeader("TTL", "-1"),
		perProvider{"fcm": "plain:400", "autopush": "errno-114", "apple": "bad-ttl", "wns": "bad-ttl", "generic": "bad-request"}},
	{"TTL 0 without cache policy", setHeader("TTL", "0"), all("accept").with("wns", "bad-ttl")},
	{"TTL 0 with no-cache", func(t *testing.T, e *badEnv, r *http.Request) *http.Request {
		r.Header.Set("TTL", "0")
		r.Header.Set("X-WNS-Cache-Policy", "no-cache")
		return r
	}, all("accept")},
	{"Urgency unknown", setHeader("Urgency", "urgent"),
		perProvider{"fcm": "plain:400", "autopush": "unknown-errno-400", "apple": "bad-urgency", "wns": "bad-request", "generic": "bad-request"}},
	{"Topic 33 characters", setHeader("Topic", strings.Repeat("a", 33)),
		perProvider{"fcm": "plain:400", "autopush": "errno-113", "apple": "bad-web-push-topic", "wns": "bad-request", "generic": "bad-request"}},
	{"Topic outside base64url", setHeader("Topic", "a+b"),
		perProvider{"fcm": "plain:400", "autopush": "errno-113", "apple": "bad-web-push-topic", "wns": "bad-request", "generic": "bad-request"}},
	{"Topic of length 4n+1", setHeader("Topic", "abcde"), all("accept").with("apple", "bad-web-push-topic")},
	{"Topic of 32", setHeader("Topic", strings.Repeat("a", 32)), all("accept")},
	{"Content-Encoding aesgcm", setHeader("Content-Encoding", "aesgcm"),
		perProvider{"fcm": "plain:400", "autopush": "errno-110", "apple": "bad-web-push-request", "wns": "bad-request", "generic": "bad-request"}},
	{"no Content-Encoding", delHeader("Content-Encoding"),
		perProvider{"fcm": "plain:400", "autopush": "errno-110", "apple": "bad-web-push-request", "wns": "bad-request", "generic": "bad-request"}},
	{"body of 4097 bytes", withBody(make([]byte, 4097)),
		perProvider{"fcm": "payload-too-large", "autopush": "errno-104", "apple": "payload-too-large", "wns": "bad-request", "generic": "payload-too-large"}},
	{"body of 5001 bytes", withBody(make([]byte, 5001)), all("payload-too-large").with("autopush", "errno-104")},
	{"body not for these keys", withBody(bytes.Repeat([]byte{7}, 200)),
		perProvider{"fcm": "plain:400", "autopush": "errno-110", "apple": "bad-web-push-request", "wns": "bad-request", "generic": "bad-request"}},
}

func TestRefusals(t *testing.T) {
	s := start(t, pushsim.Config{})
	c := client(t, s, clientOptions{})
	e := &badEnv{s: s, app: newAppServer(t), other: newAppServer(t)}
	for _, tc := range badCases {
		for _, provider := range pushsim.Providers() {
			t.Run(tc.name+"/"+provider, func(t *testing.T) {
				want, ok := tc.want[provider]
				if !ok {
					t.Fatalf("case has no expectation for %s", provider)
				}
				e.sub = subscribe(t, s, provider, "", e.app)
				req := tc.mutate(t, e, pushRequest(t, e.app, e.sub, []byte("payload")))
				got := do(t, c, req)
				ds := s.DeliveriesSince(0, "")
				last := ds[len(ds)-1]
				switch {
				case want == "accept":
					if got.status != 201 {
						t.Fatalf("status = %d (%q %v), want 201", got.status, got.body, got.header)
					}
				case strings.HasPrefix(want, "plain:"):
					if st := strings.TrimPrefix(want, "plain:"); itoa(got.status) != st || last.Answer != "plain" {
						t.Fatalf("status = %d, answer %q; want %s plain", got.status, last.Answer, st)
					}
				default:
					assertFixture(t, fixtures.MustGet(provider, want), got, last)
				}
				assertClassified(t, provider, got, last)
			})
		}
	}
}

// assertFixture checks that the client got the fixture's exact shape and that pushsim recorded
// the fixture's expected code.
func assertFixture(t *testing.T, f fixtures.Fixture, got response, d pushsim.Delivery) {
	t.Helper()
	if got.status != f.Status || got.body != f.Body {
		t.Fatalf("answer = %d %q, want %s/%s: %d %q", got.status, got.body, f.Provider, f.Name, f.Status, f.Body)
	}
	for k, v := range f.Headers {
		if g := got.header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q (%s/%s)", k, g, v, f.Provider, f.Name)
		}
	}
	wantRec := [3]any{f.Status, f.Want.Code, f.Provider + "/" + f.Name}
	if diff := cmp.Diff(wantRec, [3]any{d.Status, d.Code, d.Answer}); diff != "" {
		t.Errorf("recorded status, code, answer (-want +got):\n%s", diff)
	}
}

// assertClassified checks that what pushsim recorded as the code is what the gateway's
// classifier makes of the answer the client read: simulator and classifier agree on every
// answer, the few plain ones included.
func assertClassified(t *testing.T, provider string, got response, d pushsim.Delivery) {
	t.Helper()
	out := taxonomy.ClassifyAt(testNow, provider, got.status, got.header, []byte(got.body))
	if string(out.Code) != d.Code {
		t.Errorf("classifier says %s (%q), pushsim recorded %s", out.Code, out.Detail, d.Code)
	}
}
