package adapter_test

import (
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func TestBlockedDestinations(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testBlockedDestinations(t, path.viaProxy) })
	}
}

func testBlockedDestinations(t *testing.T, viaProxy bool) {
	h := newHarness(t, harnessOptions{registry: []byte(fastRegistry), viaProxy: viaProxy})
	good := h.subscribe(t, "fcm")
	// pushsim listens on loopback: an endpoint naming its address directly, without an
	// operator's connect-to, must be refused before any byte is sent.
	_, port, _ := net.SplitHostPort(h.sim.Addr())
	tests := []struct {
		name     string
		endpoint string
		want     taxonomy.Code
	}{
		{"loopback literal", "https://127.0.0.1:" + port + "/push/x", taxonomy.Blocked},
		{"loopback by name", "https://localhost:" + port + "/push/x", taxonomy.Blocked},
		{"IPv6 loopback", "https://[::1]:" + port + "/push/x", taxonomy.Blocked},
		{"IPv4-mapped loopback", "https://[::ffff:127.0.0.1]:" + port + "/push/x", taxonomy.Blocked},
		{"private 10/8", "https://10.1.2.3/push/x", taxonomy.Blocked},
		{"private 192.168/16", "https://192.168.0.1/push/x", taxonomy.Blocked},
		{"metadata", "https://169.254.169.254/latest/meta-data", taxonomy.Blocked},
		{"CGNAT", "https://100.64.0.1/push/x", taxonomy.Blocked},
		{"unspecified", "https://0.0.0.0:" + port + "/push/x", taxonomy.Blocked},
		{"unique local v6", "https://[fd00::1]/push/x", taxonomy.Blocked},
		{"multicast", "https://224.0.0.1/push/x", taxonomy.Blocked},
		{"6to4 wrapping a private address", "https://[2002:a00:1::1]/push/x", taxonomy.Blocked},
		{"plain http", "http://fcm.googleapis.com/fcm/send/x", taxonomy.Blocked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub := good
			sub.Endpoint = tc.endpoint
			before := len(h.sim.Deliveries())
			out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60})
			if out.Code != tc.want || out.Retryable {
				t.Fatalf("outcome = %+v, want non-retryable %s", out, tc.want)
			}
			if after := len(h.sim.Deliveries()); after != before {
				t.Fatalf("a blocked endpoint reached pushsim (%d -> %d deliveries)", before, after)
			}
			if h.proxy != nil && h.proxy.Connects() != 0 {
				t.Fatalf("a blocked endpoint reached the proxy: CONNECT %v", h.proxy.Targets())
			}
			assertNoSecrets(t, "detail", out.Detail, sub)
		})
	}
}

func TestAllowNetOpensARange(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			srv, hits := startTLS(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
			}))
			px, proxy := maybeProxy(t, path.viaProxy)
			s := senderVia(t, srv.Certificate(), nil, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, proxy)
			out := sendTo(t, s, "https://"+srv.Listener.Addr().String()+"/push/x")
			if out.Code != taxonomy.Accepted || hits.Load() != 1 {
				t.Fatalf("with 127.0.0.0/8 allowed: outcome %+v, %d hits; want ACCEPTED and 1", out, hits.Load())
			}
			if px != nil && (px.Connects() != 1 || px.Targets()[0] != srv.Listener.Addr().String()) {
				t.Fatalf("proxy CONNECTs %v, want one to %s", px.Targets(), srv.Listener.Addr())
			}
		})
	}
}

// maybeProxy starts a proxytest proxy and the adapter's Proxy for it, or neither.
func maybeProxy(t *testing.T, viaProxy bool) (*proxytest.Proxy, *adapter.Proxy) {
	t.Helper()
	if !viaProxy {
		return nil, nil
	}
	px := proxytest.Start(t, proxytest.Config{})
	proxy, err := adapter.ParseProxy(adapter.ProxyOptions{Spec: px.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return px, proxy
}

func TestRedirectsAreNeverFollowed(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testRedirectsAreNeverFollowed(t, path.viaProxy) })
	}
}

func testRedirectsAreNeverFollowed(t *testing.T, viaProxy bool) {
	var followed atomic.Int32
	srv, _ := startTLS(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			w.WriteHeader(http.StatusCreated)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	_, proxy := maybeProxy(t, viaProxy)
	s := senderVia(t, srv.Certificate(), []string{"self.example.com:443=" + srv.Listener.Addr().String()}, nil, proxy)
	out := sendTo(t, s, "https://self.example.com/push/x")
	if out.Code == taxonomy.Accepted || out.Retryable || out.Status != http.StatusTemporaryRedirect {
		t.Fatalf("outcome = %+v, want a non-retryable failure with status 307", out)
	}
	if followed.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestLargeAnswerIsCut(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testLargeAnswerIsCut(t, path.viaProxy) })
	}
}

func testLargeAnswerIsCut(t *testing.T, viaProxy bool) {
	srv, _ := startTLS(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		chunk := []byte(strings.Repeat("z", 1<<16))
		for range 128 { // 8 MiB, far past the 64 KiB the adapter reads
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	_, proxy := maybeProxy(t, viaProxy)
	s := senderVia(t, srv.Certificate(), []string{"self.example.com:443=" + srv.Listener.Addr().String()}, nil, proxy)
	out := sendTo(t, s, "https://self.example.com/push/x")
	if out.Code != taxonomy.InvalidRequest || len(out.Detail) > 256 || !strings.Contains(out.Detail, "zzzz") {
		t.Fatalf("outcome = %s, detail of %d bytes; want INVALID_REQUEST with a cut detail", out.Code, len(out.Detail))
	}
}

func TestHTTP1FallbackForSelfHosted(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testHTTP1FallbackForSelfHosted(t, path.viaProxy) })
	}
}

func testHTTP1FallbackForSelfHosted(t *testing.T, viaProxy bool) {
	var proto atomic.Value
	srv, _ := startTLS(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		w.WriteHeader(http.StatusCreated)
	}))
	_, proxy := maybeProxy(t, viaProxy)
	s := senderVia(t, srv.Certificate(), []string{"self.example.com:443=" + srv.Listener.Addr().String()}, nil, proxy)
	out := sendTo(t, s, "https://self.example.com/push/x")
	if out.Code != taxonomy.Accepted || out.Provider != "fallback" {
		t.Fatalf("outcome = %+v, want ACCEPTED via fallback", out)
	}
	if got := proto.Load(); got != "HTTP/1.1" {
		t.Fatalf("protocol = %v, want HTTP/1.1 from a server without h2", got)
	}
}

func TestTransportErrorsCarryNoEndpoint(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testTransportErrorsCarryNoEndpoint(t, path.viaProxy) })
	}
}

func testTransportErrorsCarryNoEndpoint(t *testing.T, viaProxy bool) {
	// A listener that accepts and closes at once: the send fails in transport, and the
	// error text (which net/http builds with the URL) must not reach the outcome.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, proxy := maybeProxy(t, viaProxy)
	s := senderVia(t, nil, []string{"self.example.com:443=" + ln.Addr().String()}, nil, proxy)
	const secretPath = "/push/s3cr3t-t0ken"
	out := sendTo(t, s, "https://self.example.com"+secretPath)
	if out.Code != taxonomy.TransportError || !out.Retryable {
		t.Fatalf("outcome = %+v, want a retryable TRANSPORT_ERROR", out)
	}
	if strings.Contains(out.Detail, "s3cr3t") {
		t.Fatalf("detail leaks the endpoint path: %q", out.Detail)
	}
}

func TestParseConnectToErrors(t *testing.T) {
	for _, spec := range []string{"", "a:443", "a=b", ":443=1.2.3.4:1", "a:443=:1", "a:443=1.2.3.4"} {
		if _, err := adapter.ParseConnectTo([]string{spec}); err == nil {
			t.Errorf("ParseConnectTo(%q) accepted it", spec)
		}
	}
	if _, err := adapter.ParseConnectTo([]string{"a:443=1.1.1.1:1", "A.:443=2.2.2.2:2"}); err == nil {
		t.Error("two different targets for one authority were accepted")
	}
}

func TestBlockedErrorMatches(t *testing.T) {
	err := error(&adapter.BlockedError{Addr: netip.MustParseAddr("10.0.0.1"), Reason: "private"})
	if !errors.Is(err, adapter.ErrBlocked) {
		t.Fatal("BlockedError does not match ErrBlocked")
	}
}

// startTLS starts a real TLS server on loopback, with or without HTTP/2, and counts requests.
func startTLS(t *testing.T, h2 bool, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// senderVia builds a Sender with the shipped registry that trusts cert, through proxy (nil:
// direct). A proxy adds a connection (and for an
// https:// proxy a TLS handshake) to every dial, so its sender's timeouts are those of a
// loaded machine rather than fastRegistry's.
func senderVia(t *testing.T, cert *x509.Certificate, connectTo []string, allow []netip.Prefix, proxy *adapter.Proxy) *adapter.Sender {
	t.Helper()
	data := fastRegistry
	if proxy != nil {
		data = strings.NewReplacer("timeout: 400ms", "timeout: 5s", "connect_timeout: 300ms", "connect_timeout: 2s",
			"tls_timeout: 300ms", "tls_timeout: 2s", "response_header_timeout: 350ms", "response_header_timeout: 4s").Replace(data)
	}
	reg, err := providers.Parse("fast.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	ct, err := adapter.ParseConnectTo(connectTo)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if cert != nil {
		pool.AddCert(cert)
	}
	s, err := adapter.NewSender(adapter.Config{Registry: reg, Signer: signer, ConnectTo: ct, RootCAs: pool, Allow: allow, Proxy: proxy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// sendTo sends one message to endpoint with freshly made subscription keys.
func sendTo(t *testing.T, s *adapter.Sender, endpoint string) taxonomy.Outcome {
	t.Helper()
	key := simtest.VAPIDKey(t)
	var sub job.Subscription
	sub.Endpoint = endpoint
	// Any valid P-256 point and 16-byte secret will do: these servers do not decrypt.
	sub.Keys.P256dh = key.PublicKey()
	sub.Keys.Auth = "AAAAAAAAAAAAAAAAAAAAAA"
	return s.Send(t.Context(), &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60, Key: key})
}
