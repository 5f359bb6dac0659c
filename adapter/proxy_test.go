package adapter_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

const proxyPassword = "pr0xy-s3cret"

// proxiedSender is a Sender through proxy to a TLS server with HTTP/2 at self.example.com,
// and that server.
func proxiedSender(t *testing.T, opt adapter.ProxyOptions, h2 bool) (*adapter.Sender, func() int32) {
	t.Helper()
	srv, hits := startTLS(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h2 && r.ProtoMajor != 2 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	proxy, err := adapter.ParseProxy(opt)
	if err != nil {
		t.Fatal(err)
	}
	s := senderVia(t, srv.Certificate(), []string{"self.example.com:443=" + srv.Listener.Addr().String()}, nil, proxy)
	return s, hits.Load
}

func credentialsFile(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "proxy-credentials")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestProxyCredentials(t *testing.T) {
	px := proxytest.Start(t, proxytest.Config{User: "gw", Password: proxyPassword})
	tests := []struct {
		name     string
		opt      adapter.ProxyOptions
		want     taxonomy.Code
		refusals int64
	}{
		{"none", adapter.ProxyOptions{Spec: px.URL()}, taxonomy.ProxyError, 1},
		{"wrong", adapter.ProxyOptions{Spec: px.URL(), CredentialsFile: credentialsFile(t, "gw:nope\n")}, taxonomy.ProxyError, 2},
		{"from the file", adapter.ProxyOptions{Spec: px.URL(), CredentialsFile: credentialsFile(t, "gw:"+proxyPassword+"\n")}, taxonomy.Accepted, 2},
		{"in the URL", adapter.ProxyOptions{Spec: "http://gw:" + proxyPassword + "@" + px.Addr()}, taxonomy.Accepted, 2},
		{"from the environment", adapter.ProxyOptions{Spec: "env", Getenv: env(map[string]string{
			"HTTPS_PROXY": "http://gw:" + proxyPassword + "@" + px.Addr()})}, taxonomy.Accepted, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, hits := proxiedSender(t, tc.opt, true)
			out := sendTo(t, s, "https://self.example.com/push/x")
			if out.Code != tc.want || px.AuthRefused() != tc.refusals {
				t.Fatalf("outcome %+v, %d refusals; want %s and %d", out, px.AuthRefused(), tc.want, tc.refusals)
			}
			if tc.want == taxonomy.ProxyError {
				if !out.Retryable || !strings.Contains(out.Detail, "407") || !strings.Contains(out.Detail, px.Addr()) || hits() != 0 {
					t.Fatalf("outcome %+v, %d hits; want a retryable PROXY_ERROR naming the proxy and 407, nothing sent", out, hits())
				}
			}
			if strings.Contains(out.Detail, proxyPassword) || strings.Contains(out.Detail, "Basic") {
				t.Fatalf("detail leaks the credentials: %q", out.Detail)
			}
		})
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestProxyFailuresAreProxyErrors(t *testing.T) {
	// A listener that takes connections and never answers: a proxy that hangs.
	stall, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stall.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := stall.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	stopped := proxytest.Start(t, proxytest.Config{})
	stopped.Stop()
	gateway := proxytest.Start(t, proxytest.Config{})
	gateway.AnswerAll(http.StatusBadGateway)
	tests := []struct {
		name, proxy, want string
	}{
		{"refused", stopped.URL(), "connection refused"},
		{"502", gateway.URL(), "502 Bad Gateway"},
		{"no answer", "http://" + stall.Addr().String(), "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, hits := proxiedSender(t, adapter.ProxyOptions{Spec: tc.proxy}, true)
			began := time.Now()
			out := sendTo(t, s, "https://self.example.com/push/x")
			if out.Code != taxonomy.ProxyError || !out.Retryable || out.Status != 0 || hits() != 0 {
				t.Fatalf("outcome %+v, %d hits; want a retryable PROXY_ERROR with no status, nothing sent", out, hits())
			}
			if !strings.Contains(out.Detail, tc.want) {
				t.Fatalf("detail %q does not say %q", out.Detail, tc.want)
			}
			if tc.name == "no answer" && time.Since(began) > 5*time.Second {
				t.Fatalf("a proxy that never answers held the send %s, past the registry's connect timeout", time.Since(began))
			}
		})
	}
}

func TestHTTPSProxy(t *testing.T) {
	px := proxytest.Start(t, proxytest.Config{TLS: true, User: "gw", Password: proxyPassword})
	s, hits := proxiedSender(t, adapter.ProxyOptions{Spec: px.URL(), RootCAs: px.CertPool(),
		CredentialsFile: credentialsFile(t, "gw:"+proxyPassword)}, true)
	if out := sendTo(t, s, "https://self.example.com/push/x"); out.Code != taxonomy.Accepted || hits() != 1 {
		t.Fatalf("outcome %+v, %d hits; want ACCEPTED over HTTP/2 through the TLS proxy", out, hits())
	}
	if px.Connects() != 1 {
		t.Fatalf("%d CONNECTs, want 1", px.Connects())
	}
	// A proxy whose certificate is not trusted fails as the proxy's, not the push service's.
	s, _ = proxiedSender(t, adapter.ProxyOptions{Spec: px.URL()}, true)
	if out := sendTo(t, s, "https://self.example.com/push/x"); out.Code != taxonomy.ProxyError || !strings.Contains(out.Detail, "certificate") {
		t.Fatalf("outcome %+v with an untrusted proxy certificate, want PROXY_ERROR naming the certificate", out)
	}
}

func TestNoProxyGoesDirectOnlyWithEnv(t *testing.T) {
	px := proxytest.Start(t, proxytest.Config{})
	vars := env(map[string]string{"HTTPS_PROXY": px.URL(), "NO_PROXY": "localhost,.example.com"})
	s, hits := proxiedSender(t, adapter.ProxyOptions{Spec: "env", Getenv: vars}, true)
	if out := sendTo(t, s, "https://self.example.com/push/x"); out.Code != taxonomy.Accepted || hits() != 1 || px.Connects() != 0 {
		t.Fatalf("NO_PROXY host: outcome %+v, %d hits, %d CONNECTs; want ACCEPTED direct", out, hits(), px.Connects())
	}
	// A worker run without --proxy env ignores the environment: the proxy is set from the
	// flag alone.
	p, err := adapter.ParseProxy(adapter.ProxyOptions{Spec: "", Getenv: vars})
	if err != nil || p != nil {
		t.Fatalf("ParseProxy without a spec = %v, %v; want direct", p, err)
	}
}

func TestParseProxyErrors(t *testing.T) {
	creds := credentialsFile(t, "gw:"+proxyPassword)
	tests := []struct {
		name string
		opt  adapter.ProxyOptions
		want string
	}{
		{"socks", adapter.ProxyOptions{Spec: "socks5://p.example:1080"}, "proxy Spec: want an http:// or https:// proxy URL"},
		{"no host", adapter.ProxyOptions{Spec: "http://"}, "proxy Spec: the proxy URL has no host"},
		{"path", adapter.ProxyOptions{Spec: "http://p.example:3128/x"}, "proxy Spec: a proxy URL is scheme://host:port only"},
		{"not a URL, password inside", adapter.ProxyOptions{Spec: "http://gw:" + proxyPassword + "@p.exa mple"}, "proxy Spec: not a URL"},
		{"env unset", adapter.ProxyOptions{Spec: "env", Getenv: env(nil)}, "proxy Spec: env: HTTPS_PROXY is not set"},
		{"env bad", adapter.ProxyOptions{Spec: "env", Getenv: env(map[string]string{"HTTPS_PROXY": "ftp://x"})}, "proxy Spec: env: HTTPS_PROXY: want an http://"},
		{"credentials twice", adapter.ProxyOptions{Spec: "http://gw:" + proxyPassword + "@p.example:3128", CredentialsFile: creds}, "proxy CredentialsFile: the proxy URL carries credentials too"},
		{"credentials without proxy", adapter.ProxyOptions{Spec: "none", CredentialsFile: creds}, "proxy CredentialsFile: given without a proxy"},
		{"credentials missing", adapter.ProxyOptions{Spec: "http://p.example:3128", CredentialsFile: filepath.Join(t.TempDir(), "nope")}, "proxy CredentialsFile: open"},
		{"credentials malformed", adapter.ProxyOptions{Spec: "http://p.example:3128", CredentialsFile: credentialsFile(t, proxyPassword)}, "want user:password on its first line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adapter.ParseProxy(tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseProxy = %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), proxyPassword) {
				t.Fatalf("the error quotes the password: %v", err)
			}
		})
	}
}

func TestRegistryProxyPerProvider(t *testing.T) {
	px := proxytest.Start(t, proxytest.Config{User: "gw", Password: proxyPassword})
	other := proxytest.Start(t, proxytest.Config{})
	reg := strings.NewReplacer(
		"  - id: fcm\n", "  - id: fcm\n    proxy: none\n",
		"  - id: apple\n", "  - id: apple\n    proxy: "+other.URL()+"\n",
	).Replace(fastRegistry)
	if !strings.Contains(reg, "proxy: none") || !strings.Contains(reg, "proxy: "+other.URL()) {
		t.Fatal("the test registry has no fcm or apple entry to give a proxy")
	}
	proxy, err := adapter.ParseProxy(adapter.ProxyOptions{Spec: px.URL(), CredentialsFile: credentialsFile(t, "gw:"+proxyPassword)})
	if err != nil {
		t.Fatal(err)
	}
	hp := newHarness(t, harnessOptions{registry: []byte(reg), proxy: proxy})
	for _, provider := range []string{"fcm", "apple", "autopush"} {
		if out := hp.send(t, &adapter.Message{Subscription: hp.subscribe(t, provider), Payload: []byte("x"), TTL: 60}); out.Code != taxonomy.Accepted {
			t.Fatalf("%s: outcome %+v, want ACCEPTED", provider, out)
		}
	}
	// fcm went direct, apple through its own proxy (without the worker proxy's credentials),
	// autopush through the worker's.
	if px.Connects() != 1 || other.Connects() != 1 || other.AuthRefused() != 0 {
		t.Fatalf("worker proxy %d CONNECTs, apple's %d; want 1 each", px.Connects(), other.Connects())
	}
	if got := hp.sender.ProxyOf("fcm") + "|" + hp.sender.ProxyOf("apple") + "|" + hp.sender.ProxyOf("autopush"); got != "|"+other.Addr()+"|"+px.Addr() {
		t.Fatalf("ProxyOf fcm|apple|autopush = %q", got)
	}
}

// TestTinyproxy sends to pushsim through a real tinyproxy (Debian's package, which
// scripts/install-deps.sh installs), over HTTP/2 in the tunnel, with Basic credentials.
func TestTinyproxy(t *testing.T) {
	bin, err := exec.LookPath("tinyproxy")
	if err != nil {
		t.Skip("tinyproxy is not installed (scripts/install-deps.sh installs Debian's tinyproxy package)")
	}
	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(conf, []byte("Port "+strconv.Itoa(port)+"\nListen 127.0.0.1\nTimeout 30\nMaxClients 16\n"+
		"LogLevel Info\nLogFile \""+filepath.Join(dir, "tinyproxy.log")+"\"\nPidFile \""+filepath.Join(dir, "tinyproxy.pid")+"\"\n"+
		"Allow 127.0.0.1\nBasicAuth gw "+proxyPassword+"\nDisableViaHeader Yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-d", "-c", conf)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitListening(t, addr)

	proxy, err := adapter.ParseProxy(adapter.ProxyOptions{Spec: "http://" + addr, CredentialsFile: credentialsFile(t, "gw:"+proxyPassword)})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOptions{proxy: proxy})
	for _, provider := range []string{"fcm", "autopush", "apple", "wns"} {
		sub := h.subscribe(t, provider)
		out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("via tinyproxy"), TTL: 60})
		if out.Code != taxonomy.Accepted {
			log, _ := os.ReadFile(filepath.Join(dir, "tinyproxy.log"))
			t.Fatalf("%s through tinyproxy: outcome %+v\ntinyproxy log:\n%s", provider, out, log)
		}
		ds := h.sim.DeliveriesFor(sub.Endpoint)
		if len(ds) != 1 || ds[0].Proto != "HTTP/2.0" || string(ds[0].Plaintext) != "via tinyproxy" {
			t.Fatalf("%s: pushsim saw %d deliveries (%+v), want one over HTTP/2", provider, len(ds), ds)
		}
	}
	// Without credentials tinyproxy answers 407: the proxy's failure, not the push service's.
	bare, err := adapter.ParseProxy(adapter.ProxyOptions{Spec: "http://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	hb := newHarness(t, harnessOptions{proxy: bare})
	if out := hb.send(t, &adapter.Message{Subscription: hb.subscribe(t, "fcm"), Payload: []byte("x"), TTL: 60}); out.Code != taxonomy.ProxyError || !strings.Contains(out.Detail, "407") {
		t.Fatalf("without credentials: outcome %+v, want PROXY_ERROR 407", out)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 10s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
