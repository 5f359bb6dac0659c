package ece_test

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

// rfc holds RFC 8291 Appendix A's inputs in the types the API takes.
type rfc struct {
	v    map[string][]byte
	keys *ece.Keys
	as   *ecdh.PrivateKey
	ua   *ecdh.PrivateKey
	auth []byte
}

func loadRFC(tb testing.TB) rfc {
	tb.Helper()
	v := ece.RFCVector(tb)
	keys, err := ece.ParseKeys(b64url(v["ua_public"]), b64url(v["auth_secret"]))
	if err != nil {
		tb.Fatalf("ParseKeys(RFC keys): %v", err)
	}
	as, ua := ece.RFCKeys(tb, v)
	return rfc{v: v, keys: keys, as: as, ua: ua, auth: v["auth_secret"]}
}

func (r rfc) opts() ece.Options {
	return ece.Options{EphemeralKey: r.as, Salt: r.v["salt"]}
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func TestEncryptRFC8291AppendixA(t *testing.T) {
	r := loadRFC(t)
	body, err := ece.Encrypt(r.keys, r.v["plaintext"], r.opts())
	if err != nil {
		t.Fatalf("Encrypt: %v", err)
	}
	tests := []struct {
		name string
		want []byte
		got  []byte
	}{
		{"body", r.v["body"], body},
		{"header", r.v["header"], body[:min(len(body), ece.HeaderSize)]},
		{"ciphertext", r.v["ciphertext"], body[min(len(body), ece.HeaderSize):]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(hex.EncodeToString(tt.want), hex.EncodeToString(tt.got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if len(body) != 144 {
		t.Errorf("len(body) = %d, want 144 (the RFC's Content-Length: 145 is a typo)", len(body))
	}
}

func TestAppendEncryptKeepsPrefix(t *testing.T) {
	r := loadRFC(t)
	tests := []struct {
		name string
		dst  []byte
	}{
		{"nil", nil},
		{"prefix no room", []byte("prefix")},
		{"prefix with room", append(make([]byte, 0, 512), "prefix"...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := bytes.Clone(tt.dst)
			got, err := ece.AppendEncrypt(tt.dst, r.keys, r.v["plaintext"], r.opts())
			if err != nil {
				t.Fatal(err)
			}
			want := append(prefix, r.v["body"]...)
			if diff := cmp.Diff(hex.EncodeToString(want), hex.EncodeToString(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecryptRFC8291AppendixA(t *testing.T) {
	r := loadRFC(t)
	got, err := ece.Decrypt(r.v["body"], r.ua, r.auth)
	if err != nil {
		t.Fatalf("Decrypt: %v", err)
	}
	if diff := cmp.Diff(string(r.v["plaintext"]), string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// uaKeys makes a fresh user agent: its private key and the subscription
// keys a sender would get for it.
func uaKeys(tb testing.TB) (*ecdh.PrivateKey, []byte, *ece.Keys) {
	tb.Helper()
	ua, err := ecdh.P256().GenerateKey(nil)
	if err != nil {
		tb.Fatal(err)
	}
	auth := []byte("0123456789abcdef")
	keys, err := ece.ParseKeys(b64url(ua.PublicKey().Bytes()), b64url(auth))
	if err != nil {
		tb.Fatal(err)
	}
	return ua, auth, keys
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		// No zero bytes at the end would hide padding bugs; mix in zeros.
		b[i] = byte(i % 251)
	}
	return b
}

func TestRoundTripSizes(t *testing.T) {
	ua, auth, keys := uaKeys(t)
	sizes := []int{0, 1, 2, 15, 16, 17, 31, 32, 33, 255, 256, 1024, 2048, 3000, 3992, ece.MaxPlaintext}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pt := payload(n)
			body, err := ece.Encrypt(keys, pt, ece.Options{})
			if err != nil {
				t.Fatalf("Encrypt: %v", err)
			}
			if diff := cmp.Diff(ece.HeaderSize+n+1+16, len(body)); diff != "" {
				t.Errorf("body length (-want +got):\n%s", diff)
			}
			got, err := ece.Decrypt(body, ua, auth)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			if !bytes.Equal(pt, got) {
				t.Errorf("round trip of %d bytes returned %d different bytes", n, len(got))
			}
		})
	}
}

// TestRoundTripEverySize walks every plaintext length from 0 to
// MaxPlaintext, so no length around a block or tag boundary is missed.
func TestRoundTripEverySize(t *testing.T) {
	ua, auth, keys := uaKeys(t)
	buf := make([]byte, 0, ece.MaxBodySize)
	all := payload(ece.MaxPlaintext)
	for n := 0; n <= ece.MaxPlaintext; n++ {
		var err error
		buf, err = ece.AppendEncrypt(buf[:0], keys, all[:n], ece.Options{})
		if err != nil {
			t.Fatalf("size %d: Encrypt: %v", n, err)
		}
		if len(buf) != ece.HeaderSize+n+1+16 {
			t.Fatalf("size %d: body is %d bytes", n, len(buf))
		}
		got, err := ece.Decrypt(buf, ua, auth)
		if err != nil {
			t.Fatalf("size %d: Decrypt: %v", n, err)
		}
		if !bytes.Equal(all[:n], got) {
			t.Fatalf("size %d: round trip changed the plaintext", n)
		}
	}
}

// TestTrailingZeroPlaintext: a plaintext ending in zero bytes must survive
// padding removal, which scans back to the delimiter.
func TestTrailingZeroPlaintext(t *testing.T) {
	ua, auth, keys := uaKeys(t)
	tests := []struct {
		name string
		pt   []byte
		pad  int
	}{
		{"zeros", make([]byte, 10), 0},
		{"zeros padded", make([]byte, 10), 20},
		{"ends with delimiter", []byte{1, 2, 0, 2}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := ece.Encrypt(keys, tt.pt, ece.Options{Pad: tt.pad})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ece.Decrypt(body, ua, auth)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.pt, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFreshKeyAndSaltPerMessage(t *testing.T) {
	_, _, keys := uaKeys(t)
	a, err := ece.Encrypt(keys, []byte("same"), ece.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ece.Encrypt(keys, []byte("same"), ece.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[:16], b[:16]) {
		t.Error("two messages share a salt")
	}
	if bytes.Equal(a[21:86], b[21:86]) {
		t.Error("two messages share an ephemeral key")
	}
}

func TestSizeLimit(t *testing.T) {
	ua, auth, keys := uaKeys(t)
	tests := []struct {
		name     string
		n, pad   int
		wantErr  error
		wantSize int
	}{
		{"max plaintext", 3993, 0, nil, ece.MaxBodySize},
		{"one over", 3994, 0, ece.ErrPayloadTooLarge, 0},
		{"way over", 10000, 0, ece.ErrPayloadTooLarge, 0},
		{"padded to max", 3000, 993, nil, ece.MaxBodySize},
		{"padded one over", 3000, 994, ece.ErrPayloadTooLarge, 0},
		{"empty fully padded", 0, 3993, nil, ece.MaxBodySize},
		{"huge pad overflow", 1, int(^uint(0) >> 1), ece.ErrPayloadTooLarge, 0},
		{"negative pad", 1, -1, ece.ErrBadOptions, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := payload(tt.n)
			// A failing reader proves the refusal happens before any
			// randomness (and so before any crypto) is used.
			opts := ece.Options{Pad: tt.pad}
			if tt.wantErr != nil {
				opts.Rand = iotest.ErrReader(errors.New("must not be read"))
			}
			body, err := ece.Encrypt(keys, pt, opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Encrypt error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantSize, len(body)); diff != "" {
				t.Errorf("body length (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			got, err := ece.Decrypt(body, ua, auth)
			if err != nil {
				t.Fatalf("Decrypt: %v", err)
			}
			if !bytes.Equal(pt, got) {
				t.Error("round trip changed the plaintext")
			}
		})
	}
	if diff := cmp.Diff(3993, ece.MaxPlaintext); diff != "" {
		t.Errorf("MaxPlaintext (-want +got):\n%s", diff)
	}
}

func TestPadding(t *testing.T) {
	r := loadRFC(t)
	for _, pad := range []int{0, 1, 100, 3993 - 41} {
		t.Run(fmt.Sprint(pad), func(t *testing.T) {
			opts := r.opts()
			opts.Pad = pad
			body, err := ece.Encrypt(r.keys, r.v["plaintext"], opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ece.HeaderSize+41+1+pad+16, len(body)); diff != "" {
				t.Errorf("body length (-want +got):\n%s", diff)
			}
			// The record is plaintext||0x02||zeros: check the structure by
			// decrypting with a wrong-padding-aware decryptor (ours).
			got, err := ece.Decrypt(body, r.ua, r.auth)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(r.v["plaintext"]), string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if pad == 0 {
				if diff := cmp.Diff(hex.EncodeToString(r.v["body"]), hex.EncodeToString(body)); diff != "" {
					t.Errorf("Pad 0 differs from the RFC body (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestEncryptOptionErrors(t *testing.T) {
	r := loadRFC(t)
	p384, err := ecdh.P384().GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	readErr := errors.New("entropy gone")
	tests := []struct {
		name string
		keys *ece.Keys
		opts ece.Options
		want error
	}{
		{"nil keys", nil, ece.Options{}, ece.ErrBadP256dh},
		{"zero keys", &ece.Keys{}, ece.Options{}, ece.ErrBadP256dh},
		{"short salt", r.keys, ece.Options{Salt: make([]byte, 15)}, ece.ErrBadOptions},
		{"long salt", r.keys, ece.Options{Salt: make([]byte, 17)}, ece.ErrBadOptions},
		{"empty non-nil salt", r.keys, ece.Options{Salt: []byte{}}, ece.ErrBadOptions},
		{"P-384 ephemeral", r.keys, ece.Options{EphemeralKey: p384}, ece.ErrBadOptions},
		{"rand fails", r.keys, ece.Options{Rand: iotest.ErrReader(readErr)}, readErr},
		{"rand short", r.keys, ece.Options{Rand: strings.NewReader("short")}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := ece.AppendEncrypt(dst, tt.keys, []byte("hi"), tt.opts)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
			if diff := cmp.Diff("keep", string(got)); diff != "" {
				t.Errorf("dst after error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRandSupplySalt(t *testing.T) {
	r := loadRFC(t)
	opts := ece.Options{EphemeralKey: r.as, Rand: bytes.NewReader(r.v["salt"])}
	body, err := ece.Encrypt(r.keys, r.v["plaintext"], opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hex.EncodeToString(r.v["body"]), hex.EncodeToString(body)); diff != "" {
		t.Errorf("salt from Rand (-want +got):\n%s", diff)
	}
}
