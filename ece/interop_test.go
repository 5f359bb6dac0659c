package ece_test

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

// acceptTransport is an in-process http.RoundTripper that answers 201 to
// every request without touching the network, keeping the last body. It
// stands in for the push service, not for any code of ours: webpush-go
// only exposes its encryption through SendNotification, so this is how we
// capture its bodies and time its encryption (plus its JWT signing).
type acceptTransport struct {
	mu   sync.Mutex
	last []byte
	keep bool
}

func (t *acceptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.keep {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.last = b
		t.mu.Unlock()
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusCreated,
		Status:     "201 Created",
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
		Body:       http.NoBody,
		Request:    req,
	}, nil
}

func (t *acceptTransport) body() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// webpushGo is a ready-to-send webpush-go setup for one subscription.
type webpushGo struct {
	sub  *webpush.Subscription
	opts *webpush.Options
	rt   *acceptTransport
}

func newWebpushGo(tb testing.TB, p256dh, auth string, recordSize uint32, keep bool) webpushGo {
	tb.Helper()
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		tb.Fatal(err)
	}
	rt := &acceptTransport{keep: keep}
	return webpushGo{
		sub: &webpush.Subscription{
			Endpoint: "https://push.example.test/wpush/v2/token",
			Keys:     webpush.Keys{P256dh: p256dh, Auth: auth},
		},
		opts: &webpush.Options{
			HTTPClient:      &http.Client{Transport: rt},
			RecordSize:      recordSize,
			Subscriber:      "ops@example.com",
			TTL:             60,
			VAPIDPublicKey:  pub,
			VAPIDPrivateKey: priv,
		},
		rt: rt,
	}
}

func (w webpushGo) send(tb testing.TB, msg []byte) {
	resp, err := webpush.SendNotification(msg, w.sub, w.opts)
	if err != nil {
		tb.Fatalf("webpush-go: %v", err)
	}
	resp.Body.Close()
}

// TestDecryptWebpushGo proves wire compatibility: bodies made by another
// implementation (padded to its record size, as it does by default) open
// with our Decrypt.
func TestDecryptWebpushGo(t *testing.T) {
	ua, auth, _ := uaKeys(t)
	tests := []struct {
		name       string
		n          int
		recordSize uint32
		wantLen    int
	}{
		{"empty default record", 0, 0, 4096},
		{"small default record", 32, 0, 4096},
		{"large default record", 3000, 0, 4096},
		{"max default record", ece.MaxPlaintext, 0, 4096},
		{"record size 1024", 100, 1024, 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWebpushGo(t, b64url(ua.PublicKey().Bytes()), b64url(auth), tt.recordSize, true)
			pt := payload(tt.n)
			w.send(t, pt)
			body := w.rt.body()
			if diff := cmp.Diff(tt.wantLen, len(body)); diff != "" {
				t.Errorf("webpush-go body length (-want +got):\n%s", diff)
			}
			got, err := ece.Decrypt(body, ua, auth)
			if err != nil {
				t.Fatalf("Decrypt(webpush-go body): %v", err)
			}
			if !bytes.Equal(pt, got) {
				t.Errorf("decrypted %d bytes, want the %d sent", len(got), len(pt))
			}
		})
	}
}
