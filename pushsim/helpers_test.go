package pushsim_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// testNow is the simulator's clock in these tests: JWT expiry is checked against it.
var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

const testSubject = "mailto:ops@gateway.example.com"

// start runs a simulator on a fixed clock, closed at the end of the test.
func start(t testing.TB, cfg pushsim.Config) *pushsim.Server {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return testNow }
	}
	return simtest.Start(t, cfg)
}

// setup is what most tests begin with: a simulator (as start runs it), a client that reaches it
// over HTTP/2, and an application server to sign pushes.
func setup(t testing.TB, cfg pushsim.Config) (*pushsim.Server, *http.Client, appServer) {
	t.Helper()
	s := start(t, cfg)
	return s, client(t, s, clientOptions{}), newAppServer(t)
}

// protocols are the two a client may speak to the simulator: what a fault does must reach the
// client whichever it speaks.
var protocols = []struct {
	name  string
	http1 bool
}{{"HTTP/2", false}, {"HTTP/1.1", true}}

type clientOptions struct {
	http1   bool          // offer only http/1.1 in ALPN
	timeout time.Duration // 0: none
}

// client trusts the simulator's CA and dials its address for every host: a test-local
// connect-to, so requests carry the real provider names in SNI and Host.
func client(t testing.TB, s *pushsim.Server, opt clientOptions) *http.Client {
	t.Helper()
	var protos http.Protocols
	protos.SetHTTP1(opt.http1)
	protos.SetHTTP2(!opt.http1)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, s.Addr())
		},
		TLSClientConfig:     &tls.Config{RootCAs: s.CertPool()},
		Protocols:           &protos,
		MaxIdleConnsPerHost: 64,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: opt.timeout}
}

// appServer is an application server: a VAPID key pair it signs with.
type appServer struct {
	key *ecdsa.PrivateKey
	pub string // base64url uncompressed point
}

func newAppServer(t testing.TB) appServer {
	t.Helper()
	k := vapidtest.NewKey(t)
	return appServer{key: k.Private, pub: k.PublicKey()}
}

// jwt signs claims as a compact ES256 JWS: the test's own few lines, shared with nothing.
func (a appServer) jwt(t testing.TB, claims any) string {
	t.Helper()
	return a.jwtWithHeader(t, `{"typ":"JWT","alg":"ES256"}`, claims)
}

func (a appServer) jwtWithHeader(t testing.TB, header string, claims any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signing := b64(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, a.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// authorization is the RFC 8292 header for a push to endpoint, valid for 12 hours.
func (a appServer) authorization(t testing.TB, endpoint string) string {
	t.Helper()
	return "vapid t=" + a.jwt(t, claims{Aud: originOf(t, endpoint), Exp: testNow.Add(12 * time.Hour).Unix(), Sub: testSubject}) + ", k=" + a.pub
}

type claims struct {
	Aud string `json:"aud,omitempty"`
	Exp int64  `json:"exp,omitempty"`
	Sub string `json:"sub,omitempty"`
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func originOf(t testing.TB, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + u.Host
}

// encrypt is what a sender does with a subscription's keys (RFC 8291).
func encrypt(t testing.TB, sub job.Subscription, plaintext []byte) []byte {
	t.Helper()
	keys, err := ece.ParseKeys(sub.Keys.P256dh, sub.Keys.Auth)
	if err != nil {
		t.Fatalf("ParseKeys: %v", err)
	}
	body, err := ece.Encrypt(keys, plaintext, ece.Options{})
	if err != nil {
		t.Fatalf("Encrypt: %v", err)
	}
	return body
}

// pushRequest is a correct push of plaintext to sub, signed by app.
func pushRequest(t testing.TB, app appServer, sub job.Subscription, plaintext []byte) *http.Request {
	t.Helper()
	return rawPush(t, sub.Endpoint, app.authorization(t, sub.Endpoint), encrypt(t, sub, plaintext))
}

func rawPush(t testing.TB, endpoint, authorization string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("TTL", "60")
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", authorization)
	return req
}

type response struct {
	status int
	header http.Header
	body   string
}

// do sends req and reads the whole answer.
func do(t testing.TB, c *http.Client, req *http.Request) response {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func subscribe(t testing.TB, s *pushsim.Server, provider, host string, app appServer) job.Subscription {
	t.Helper()
	sub, err := s.Subscribe(provider, host, app.pub)
	if err != nil {
		t.Fatalf("Subscribe(%s, %q): %v", provider, host, err)
	}
	return sub
}

// waitFor polls cond until it holds or a few seconds pass: for what happens after the client
// has stopped listening (a stalled handler giving up).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
