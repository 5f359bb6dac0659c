package ece_test

import (
	"fmt"
	"testing"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/webpush-gateway/webpush-gateway/ece"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
)

var benchSizes = []int{32, 256, 2048}

// eachSize runs a sub-benchmark for every payload size of benchSizes, its throughput counted in
// plaintext bytes: prepare makes the operation on that plaintext (untimed), and b.Loop repeats
// it.
func eachSize(b *testing.B, prepare func(b *testing.B, pt []byte) func() error) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			op := prepare(b, payload(n))
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if err := op(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncrypt is one production message: fresh ephemeral key, random
// salt, ECDH, derivation, AES-GCM, and a newly allocated body.
func BenchmarkEncrypt(b *testing.B) {
	_, _, keys := uaKeys(b)
	eachSize(b, func(_ *testing.B, pt []byte) func() error {
		return func() error {
			_, err := ece.Encrypt(keys, pt, ece.Options{})
			return err
		}
	})
}

// BenchmarkAppendEncrypt is Encrypt into a reused per-worker buffer.
func BenchmarkAppendEncrypt(b *testing.B) {
	_, _, keys := uaKeys(b)
	eachSize(b, func(_ *testing.B, pt []byte) func() error {
		buf := make([]byte, 0, ece.MaxBodySize)
		return func() error {
			var err error
			buf, err = ece.AppendEncrypt(buf[:0], keys, pt, ece.Options{})
			return err
		}
	})
}

// BenchmarkParseKeysEncrypt adds ParseKeys, for callers that get the keys
// as strings with every message.
func BenchmarkParseKeysEncrypt(b *testing.B) {
	ua, auth, _ := uaKeys(b)
	p256dh, a := b64url(ua.PublicKey().Bytes()), b64url(auth)
	pt := payload(256)
	b.ReportAllocs()
	for b.Loop() {
		keys, err := ece.ParseKeys(p256dh, a)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ece.Encrypt(keys, pt, ece.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseKeys(b *testing.B) {
	ua, auth, _ := uaKeys(b)
	p256dh, a := b64url(ua.PublicKey().Bytes()), b64url(auth)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ece.ParseKeys(p256dh, a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecrypt(b *testing.B) {
	ua, auth, keys := uaKeys(b)
	eachSize(b, func(b *testing.B, pt []byte) func() error {
		body, err := ece.Encrypt(keys, pt, ece.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return func() error {
			_, err := ece.Decrypt(body, ua, auth)
			return err
		}
	})
}

// BenchmarkWebpushGoEncrypt times github.com/SherClockHolmes/webpush-go
// doing the same work. Its encryption is not exported on its own, so this
// calls webpush.SendNotification with an http.Client whose Transport is
// acceptTransport, an in-process RoundTripper that answers 201 without any
// network. That is not a mock of our code: it isolates webpush-go's
// per-message cost, which is key decoding, encryption, building the
// request and signing a VAPID JWT (ES256) every time. Compare with
// BenchmarkEncrypt (our encryption and nothing else). Note that webpush-go
// also pads every body to its RecordSize, 4096 by default, so it always
// seals about 4 KB whatever the payload.
func BenchmarkWebpushGoEncrypt(b *testing.B) {
	ua, auth, _ := uaKeys(b)
	w := newWebpushGo(b, b64url(ua.PublicKey().Bytes()), b64url(auth), 0, false)
	eachSize(b, func(b *testing.B, pt []byte) func() error {
		return func() error {
			w.send(b, pt)
			return nil
		}
	})
}

// BenchmarkEncryptPadded4096 is our Encrypt padded to a 4096-byte body,
// i.e. sealing as many bytes as webpush-go does by default, for a like for
// like comparison of the encryption work.
func BenchmarkEncryptPadded4096(b *testing.B) {
	_, _, keys := uaKeys(b)
	eachSize(b, func(_ *testing.B, pt []byte) func() error {
		opts := ece.Options{Pad: ece.MaxPlaintext - len(pt)}
		return func() error {
			_, err := ece.Encrypt(keys, pt, opts)
			return err
		}
	})
}

// BenchmarkWebpushGoVAPIDOnly approximates the part of
// BenchmarkWebpushGoEncrypt that is not encryption: what webpush-go's
// getVAPIDAuthorizationHeader does per message (decode the VAPID key,
// recompute its public point with ScalarMult, sign an ES256 JWT with
// golang-jwt), as vapidtest.WebpushGoVAPIDHeader replays it. Subtracting it
// from BenchmarkWebpushGoEncrypt estimates webpush-go's encryption cost alone.
func BenchmarkWebpushGoVAPIDOnly(b *testing.B) {
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := vapidtest.WebpushGoVAPIDHeader("https://push.example.test/wpush/v2/token", "mailto:ops@example.com", priv, pub); err != nil {
			b.Fatal(err)
		}
	}
}
