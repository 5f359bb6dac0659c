package adapter_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

const (
	subject     = "mailto:ops@webpush-gateway.example.com"
	genericHost = "push.example.net"
)

// harness is pushsim plus a Sender wired to it under the real provider host names.
type harness struct {
	sim    *pushsim.Server
	proxy  *proxytest.Proxy // nil when the harness sends direct
	sender *adapter.Sender
	signer *vapid.Signer
	key    *vapid.Key
	clock  *timetest.Clock // shared by the signer and the classifier
}

type harnessOptions struct {
	registry  []byte   // nil: the shipped registry.yaml
	connectTo []string // extra overrides
	now       time.Time
	// viaProxy sends through a proxytest CONNECT proxy; proxy, when set, through that one.
	viaProxy bool
	proxy    *adapter.Proxy
}

// paths are the two ways out that every SSRF and interop test runs both: straight to the push
// service, and through an HTTP CONNECT proxy.
var paths = []struct {
	name     string
	viaProxy bool
}{{"direct", false}, {"proxy", true}}

func newHarness(t testing.TB, opt harnessOptions) *harness {
	t.Helper()
	sim := simtest.Start(t, pushsim.Config{})
	data := opt.registry
	if data == nil {
		var err error
		if data, err = os.ReadFile("../registry.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := providers.Parse("registry.yaml", data)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	if opt.now.IsZero() {
		opt.now = time.Now()
	}
	c := timetest.NewClock(opt.now)
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: subject, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	specs := append(sim.ConnectTo(), net.JoinHostPort(genericHost, "443")+"="+sim.Addr())
	specs = append(specs, opt.connectTo...)
	connectTo, err := adapter.ParseConnectTo(specs)
	if err != nil {
		t.Fatal(err)
	}
	var px *proxytest.Proxy
	proxy := opt.proxy
	if opt.viaProxy {
		px = proxytest.Start(t, proxytest.Config{})
		if proxy, err = adapter.ParseProxy(adapter.ProxyOptions{Spec: px.URL()}); err != nil {
			t.Fatal(err)
		}
	}
	sender, err := adapter.NewSender(adapter.Config{
		Registry: reg, Signer: signer, ConnectTo: connectTo, RootCAs: sim.CertPool(), Now: c.Now,
		JobIDHeader: "X-Job-Id", Proxy: proxy,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Close)
	return &harness{sim: sim, proxy: px, sender: sender, signer: signer, key: simtest.VAPIDKey(t), clock: c}
}

// subscribe makes a subscription on pushsim bound to the harness key.
func (h *harness) subscribe(t *testing.T, provider string) job.Subscription {
	t.Helper()
	host := ""
	if provider == "generic" {
		host = genericHost
	}
	return h.subscribeWith(t, provider, host, h.key)
}

func (h *harness) subscribeWith(t *testing.T, provider, host string, key *vapid.Key) job.Subscription {
	t.Helper()
	ps, err := h.sim.Subscribe(provider, host, key.PublicKey())
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", provider, err)
	}
	var s job.Subscription
	s.Endpoint, s.Keys.P256dh, s.Keys.Auth = ps.Endpoint, ps.Keys.P256dh, ps.Keys.Auth
	return s
}

func (h *harness) send(t *testing.T, m *adapter.Message) taxonomy.Outcome {
	t.Helper()
	if m.Key == nil {
		m.Key = h.key
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.sender.Send(ctx, m)
}

// assertNoSecrets fails when text carries any part of a subscription that must stay private:
// the endpoint path or token, p256dh, or auth.
func assertNoSecrets(t *testing.T, what, text string, s job.Subscription) {
	t.Helper()
	secrets := []string{s.Keys.P256dh, s.Keys.Auth}
	if i := strings.Index(s.Endpoint, "://"); i >= 0 {
		if j := strings.IndexAny(s.Endpoint[i+3:], "/?"); j >= 0 {
			secrets = append(secrets, s.Endpoint[i+3+j:])
		}
	}
	for _, sec := range secrets {
		if len(sec) > 4 && strings.Contains(text, sec) {
			t.Errorf("%s leaks a subscription secret: %q", what, text)
		}
	}
}

// otherKey is a VAPID key no subscription was made with.
func otherKey(t *testing.T) *vapid.Key {
	t.Helper()
	k, err := vapid.GenerateKey("other")
	if err != nil {
		t.Fatal(err)
	}
	return k
}
