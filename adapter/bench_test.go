package adapter_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proxytest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Run: go test -run '^$' -bench BenchmarkSend -benchmem ./adapter/
//
// The send path is measured against pushsim in a child process (this test binary, started
// again with benchPushsimEnv set), so the allocations and CPU of the simulator's TLS server and
// decryption are not counted against the sender: B/op and allocs/op are the client's alone.
// Both senders talk to the same simulator over TLS and HTTP/2 with the same payload.

const benchPushsimEnv = "ADAPTER_BENCH_PUSHSIM_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(benchPushsimEnv); dir != "" {
		os.Exit(servePushsimChild(dir))
	}
	os.Exit(m.Run())
}

// servePushsimChild runs pushsim until its standard input closes.
func servePushsimChild(dir string) int {
	s, err := pushsim.Start(pushsim.Config{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	fmt.Printf("%s %s %s\n", s.Addr(), s.AdminURL(), s.CAFile())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// remoteSim is a pushsim running in a child process.
type remoteSim struct {
	addr, admin string
	pool        *x509.CertPool
}

func startRemoteSim(b *testing.B) *remoteSim {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchPushsimEnv+"="+b.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("pushsim child: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 {
		b.Fatalf("pushsim child printed %q", line)
	}
	pem, err := os.ReadFile(f[2])
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &remoteSim{addr: f[0], admin: f[1], pool: pool}
}

func (r *remoteSim) subscribe(b *testing.B, provider, key string) job.Subscription {
	b.Helper()
	body, _ := json.Marshal(pushsim.SubscribeRequest{Provider: provider, ApplicationServerKey: key})
	resp, err := http.Post(r.admin+"/subscriptions", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sub job.Subscription
	if err := json.NewDecoder(resp.Body).Decode(&sub); err != nil || sub.Endpoint == "" {
		b.Fatalf("subscribe: %v (status %d)", err, resp.StatusCode)
	}
	return sub
}

// benchPayload is a typical notification: a title, a body and a URL as JSON.
var benchPayload = []byte(`{"title":"Your order shipped","body":"Order 4417 left the warehouse and arrives Thursday.","url":"https://shop.example.com/orders/4417"}`)

func BenchmarkSend(b *testing.B) {
	sim := startRemoteSim(b)
	webpushPriv, webpushPub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		b.Fatal(err)
	}
	key, err := vapid.ParseKey("default", []byte(webpushPriv))
	if err != nil {
		b.Fatal(err)
	}
	if key.PublicKey() != strings.TrimRight(webpushPub, "=") {
		b.Fatalf("the same key loads with another public key: %s vs %s", key.PublicKey(), webpushPub)
	}

	// The gateway direct, and through a CONNECT proxy on loopback (the tunnel is opened once;
	// every send then pays the proxy's copy of its bytes); and direct with the message a lane
	// sends, which carries its job's parse of the endpoint and keys (job.Parsed).
	for _, path := range []struct {
		name      string
		viaProxy  bool
		jobParsed bool
	}{{"gateway", false, false}, {"gateway-via-proxy", true, false}, {"gateway-job-parsed", false, true}} {
		b.Run(path.name, func(b *testing.B) {
			var proxy *adapter.Proxy
			if path.viaProxy {
				px := proxytest.Start(b, proxytest.Config{})
				var err error
				if proxy, err = adapter.ParseProxy(adapter.ProxyOptions{Spec: px.URL()}); err != nil {
					b.Fatal(err)
				}
			}
			benchGateway(b, sim, key, proxy, path.jobParsed)
		})
	}

	b.Run("webpush-go", func(b *testing.B) {
		// The same TLS + HTTP/2 client a careful webpush-go user would share across sends.
		d := &net.Dialer{Timeout: 5 * time.Second}
		client := &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: sim.pool},
			ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, sim.addr)
			},
		}}
		defer client.CloseIdleConnections()
		sub := sim.subscribe(b, "fcm", key.PublicKey())
		ws := &webpush.Subscription{Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.Keys.P256dh, Auth: sub.Keys.Auth}}
		opts := &webpush.Options{HTTPClient: client, Subscriber: "ops@example.com", VAPIDPublicKey: webpushPub, VAPIDPrivateKey: webpushPriv, TTL: 3600}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := webpush.SendNotification(benchPayload, ws, opts)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("webpush-go got status %d", resp.StatusCode)
			}
		}
	})
}

// benchGateway sends one message after another through a Sender to sim's FCM, via proxy (nil:
// direct); jobParsed gives the message the parse a decode of its job made, as a lane does.
func benchGateway(b *testing.B, sim *remoteSim, key *vapid.Key, proxy *adapter.Proxy, jobParsed bool) {
	data, err := os.ReadFile("../registry.yaml")
	if err != nil {
		b.Fatal(err)
	}
	reg, err := providers.Parse("registry.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: "mailto:ops@example.com"})
	if err != nil {
		b.Fatal(err)
	}
	connectTo, _ := adapter.ParseConnectTo([]string{"fcm.googleapis.com:443=" + sim.addr})
	s, err := adapter.NewSender(adapter.Config{Registry: reg, Signer: signer, ConnectTo: connectTo, RootCAs: sim.pool, Proxy: proxy})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := &adapter.Message{Subscription: sim.subscribe(b, "fcm", key.PublicKey()), Payload: benchPayload, TTL: 3600, Key: key}
	if jobParsed {
		raw, err := json.Marshal(map[string]any{"id": "bench", "subscription": m.Subscription, "payload": string(benchPayload)})
		if err != nil {
			b.Fatal(err)
		}
		j, err := job.Decode(raw, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		m.Subscription, m.Parsed = j.Subscription, j.Parsed
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out := s.Send(ctx, m); out.Code != taxonomy.Accepted {
			b.Fatalf("outcome %+v", out)
		}
	}
	b.ReportMetric(float64(signer.Signatures()), "signatures")
}
