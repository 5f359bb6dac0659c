package ece_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/url"
	"testing"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/golang-jwt/jwt/v5"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

var benchSizes = []int{32, 256, 2048}

// BenchmarkEncrypt is one production message: fresh ephemeral key, random
// salt, ECDH, derivation, AES-GCM, and a newly allocated body.
func BenchmarkEncrypt(b *testing.B) {
	_, _, keys := uaKeys(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			pt := payload(n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ece.Encrypt(keys, pt, ece.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendEncrypt is Encrypt into a reused per-worker buffer.
func BenchmarkAppendEncrypt(b *testing.B) {
	_, _, keys := uaKeys(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			pt := payload(n)
			buf := make([]byte, 0, ece.MaxBodySize)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = ece.AppendEncrypt(buf[:0], keys, pt, ece.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
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
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			body, err := ece.Encrypt(keys, payload(n), ece.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ece.Decrypt(body, ua, auth); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
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
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			pt := payload(n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				w.send(b, pt)
			}
		})
	}
}

// BenchmarkEncryptPadded4096 is our Encrypt padded to a 4096-byte body,
// i.e. sealing as many bytes as webpush-go does by default, for a like for
// like comparison of the encryption work.
func BenchmarkEncryptPadded4096(b *testing.B) {
	_, _, keys := uaKeys(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			pt := payload(n)
			opts := ece.Options{Pad: ece.MaxPlaintext - n}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ece.Encrypt(keys, pt, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWebpushGoVAPIDOnly approximates the part of
// BenchmarkWebpushGoEncrypt that is not encryption: it repeats, step by
// step, what webpush-go's getVAPIDAuthorizationHeader does per message
// (decode the VAPID key, recompute its public point with ScalarMult, sign
// an ES256 JWT with golang-jwt). Subtracting it from
// BenchmarkWebpushGoEncrypt estimates webpush-go's encryption cost alone.
func BenchmarkWebpushGoVAPIDOnly(b *testing.B) {
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		u, err := url.Parse("https://push.example.test/wpush/v2/token")
		if err != nil {
			b.Fatal(err)
		}
		token := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
			"aud": u.Scheme + "://" + u.Host,
			"exp": time.Now().Add(12 * time.Hour).Unix(),
			"sub": "mailto:ops@example.com",
		})
		d, err := base64.RawURLEncoding.DecodeString(priv)
		if err != nil {
			b.Fatal(err)
		}
		curve := elliptic.P256()
		//lint:ignore SA1019 webpush-go builds its key this way; the benchmark measures what it does
		x, y := curve.ScalarMult(curve.Params().Gx, curve.Params().Gy, d)
		//lint:ignore SA1019 as above
		key := &ecdsa.PrivateKey{PublicKey: ecdsa.PublicKey{Curve: curve, X: x, Y: y}, D: new(big.Int).SetBytes(d)}
		s, err := token.SignedString(key)
		if err != nil {
			b.Fatal(err)
		}
		p, err := base64.RawURLEncoding.DecodeString(pub)
		if err != nil {
			b.Fatal(err)
		}
		_ = "vapid t=" + s + ", k=" + base64.RawURLEncoding.EncodeToString(p)
	}
}
