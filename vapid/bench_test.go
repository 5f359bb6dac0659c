package vapid_test

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Run: go test -run '^$' -bench . -benchmem ./vapid/

// BenchmarkHeaderCached is the hot path: every message after the first for
// an audience within a token's lifetime is a cache hit.
func BenchmarkHeaderCached(b *testing.B) {
	key := newTestKey(b, "main")
	s := newTestSigner(b, vapid.SignerOptions{Now: func() time.Time { return t0 }})
	if _, err := s.Header(key, audA, 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Header(key, audA, 0); err != nil {
			b.Fatal(err)
		}
	}
	if s.Signatures() != 1 {
		b.Fatalf("Signatures = %d, want 1: not measuring hits", s.Signatures())
	}
}

// BenchmarkSign is a miss: the clock jumps a whole lifetime per call, so
// every call finds its entry stale, replaces it and makes one ES256 signature.
func BenchmarkSign(b *testing.B) {
	key := newTestKey(b, "main")
	now := t0
	s := newTestSigner(b, vapid.SignerOptions{Now: func() time.Time {
		now = now.Add(vapid.DefaultLifetime)
		return now
	}})
	n := uint64(0)
	for b.Loop() {
		if _, err := s.Header(key, audA, 0); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if s.Signatures() != n {
		b.Fatalf("Signatures = %d, want %d: not measuring misses", s.Signatures(), n)
	}
}

// BenchmarkHeaderParallel is the hot path from all Ps at once, spread over
// eight audiences (cache hits; the cache must not serialise readers).
func BenchmarkHeaderParallel(b *testing.B) {
	key := newTestKey(b, "main")
	s := newTestSigner(b, vapid.SignerOptions{Now: func() time.Time { return t0 }})
	auds := []string{
		"https://fcm.googleapis.com", "https://updates.push.services.mozilla.com",
		"https://web.push.apple.com", "https://wns2-par02p.notify.windows.com",
		"https://push1.example.net", "https://push2.example.net",
		"https://push3.example.net", "https://push4.example.net",
	}
	for _, a := range auds {
		if _, err := s.Header(key, a, 0); err != nil {
			b.Fatal(err)
		}
	}
	var seq atomic.Uint32
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(1))
		for pb.Next() {
			if _, err := s.Header(key, auds[i%len(auds)], 0); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	if s.Signatures() != uint64(len(auds)) {
		b.Fatalf("Signatures = %d, want %d", s.Signatures(), len(auds))
	}
}

// BenchmarkWebpushGoJWT is what webpush-go v1.4.0 does for the VAPID header
// of every message (it has no cache), replayed by vapidtest.WebpushGoVAPIDHeader
// since getVAPIDAuthorizationHeader is unexported. See BenchmarkWebpushGoSend
// for the same thing measured through SendNotification.
func BenchmarkWebpushGoJWT(b *testing.B) {
	privB64, pubB64, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		b.Fatal(err)
	}
	endpoint := "https://push.example.net/wpush/v2/gAAAAABbZ7"
	for b.Loop() {
		if _, err := vapidtest.WebpushGoVAPIDHeader(endpoint, testSub, privB64, pubB64); err != nil {
			b.Fatal(err)
		}
	}
}

// okTransport answers every request 201 in process, reading the body as a
// push service would.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// BenchmarkWebpushGoSend is webpush-go's whole per-message cost through
// webpush.SendNotification with an in-process RoundTripper answering 201:
// the JWT above plus its RFC 8291 encryption (padded to 4096 bytes, its
// default) and request building. For context only; BenchmarkWebpushGoJWT
// is the comparable figure for BenchmarkSign and BenchmarkHeaderCached.
func BenchmarkWebpushGoSend(b *testing.B) {
	privB64, pubB64, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		b.Fatal(err)
	}
	ua, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	sub := &webpush.Subscription{
		Endpoint: "https://push.example.net/wpush/v2/gAAAAABbZ7",
		Keys: webpush.Keys{
			P256dh: base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()),
			Auth:   base64.RawURLEncoding.EncodeToString(auth),
		},
	}
	opts := &webpush.Options{
		HTTPClient:      &http.Client{Transport: okTransport{}},
		Subscriber:      strings.TrimPrefix(testSub, "mailto:"),
		TTL:             60,
		VAPIDPublicKey:  pubB64,
		VAPIDPrivateKey: privB64,
	}
	msg := []byte(`{"title":"hello","body":"a typical small notification payload"}`)
	for b.Loop() {
		resp, err := webpush.SendNotification(msg, sub, opts)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d", resp.StatusCode)
		}
		_ = resp.Body.Close()
	}
}
