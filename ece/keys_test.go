package ece_test

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

// TestParseKeysEncodings: every accepted spelling of the RFC keys must give
// keys that reproduce the RFC body.
func TestParseKeysEncodings(t *testing.T) {
	r := loadRFC(t)
	p, a := r.v["ua_public"], r.v["auth_secret"]
	tests := []struct {
		name         string
		p256dh, auth string
	}{
		{"base64url raw", base64.RawURLEncoding.EncodeToString(p), base64.RawURLEncoding.EncodeToString(a)},
		{"base64url padded", base64.URLEncoding.EncodeToString(p), base64.URLEncoding.EncodeToString(a)},
		{"std raw", base64.RawStdEncoding.EncodeToString(p), base64.RawStdEncoding.EncodeToString(a)},
		{"std padded", base64.StdEncoding.EncodeToString(p), base64.StdEncoding.EncodeToString(a)},
		{"mixed encodings", base64.StdEncoding.EncodeToString(p), base64.RawURLEncoding.EncodeToString(a)},
		{"surrounding white space", " \t" + base64.RawURLEncoding.EncodeToString(p) + "\n", "\r\n" + base64.URLEncoding.EncodeToString(a) + "  "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ece.ParseKeys(tt.p256dh, tt.auth)
			if err != nil {
				t.Fatalf("ParseKeys: %v", err)
			}
			body, err := ece.Encrypt(keys, r.v["plaintext"], r.opts())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(hex.EncodeToString(r.v["body"]), hex.EncodeToString(body)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseKeysRejects(t *testing.T) {
	r := loadRFC(t)
	p, a := r.v["ua_public"], r.v["auth_secret"]
	enc := base64.RawURLEncoding.EncodeToString
	goodP, goodA := enc(p), enc(a)

	offCurve := append([]byte(nil), p...)
	offCurve[64] ^= 1
	compressed := append([]byte{0x02 | p[64]&1}, p[1:33]...)
	hybrid := append([]byte{0x06 | p[64]&1}, p[1:]...)
	infinity := make([]byte, 65)
	xTooBig := append([]byte{4}, make([]byte, 64)...)
	for i := 1; i < 33; i++ {
		xTooBig[i] = 0xff
	}
	std := base64.StdEncoding.EncodeToString(p)
	// A standard-alphabet key that uses '+' or '/' must not have '-' or '_'.
	mixedAlphabet := strings.Replace(std, "+", "-", 1)
	if !strings.Contains(std, "+") {
		mixedAlphabet = strings.Replace(std, "/", "_", 1)
	}

	tests := []struct {
		name         string
		p256dh, auth string
		want         error
	}{
		{"p256dh empty", "", goodA, ece.ErrBadP256dh},
		{"p256dh white space only", "  \n", goodA, ece.ErrBadP256dh},
		{"p256dh 64 bytes", enc(p[:64]), goodA, ece.ErrBadP256dh},
		{"p256dh 66 bytes", enc(append(append([]byte(nil), p...), 0)), goodA, ece.ErrBadP256dh},
		{"p256dh 97 bytes (P-384 size)", enc(make([]byte, 97)), goodA, ece.ErrBadP256dh},
		{"p256dh not on curve", enc(offCurve), goodA, ece.ErrBadP256dh},
		{"p256dh compressed", enc(compressed), goodA, ece.ErrBadP256dh},
		{"p256dh hybrid form", enc(hybrid), goodA, ece.ErrBadP256dh},
		{"p256dh all zero", enc(infinity), goodA, ece.ErrBadP256dh},
		{"p256dh coordinate over p", enc(xTooBig), goodA, ece.ErrBadP256dh},
		{"p256dh bad characters", "!" + goodP[1:], goodA, ece.ErrBadP256dh},
		{"p256dh inner white space", goodP[:40] + " " + goodP[40:], goodA, ece.ErrBadP256dh},
		{"p256dh mixed alphabets", mixedAlphabet, goodA, ece.ErrBadP256dh},
		{"p256dh wrong padding", goodP + "===", goodA, ece.ErrBadP256dh},
		{"p256dh very long", strings.Repeat("A", 10000), goodA, ece.ErrBadP256dh},
		{"auth empty", goodP, "", ece.ErrBadAuth},
		{"auth 15 bytes", goodP, enc(a[:15]), ece.ErrBadAuth},
		{"auth 17 bytes", goodP, enc(append(append([]byte(nil), a...), 1)), ece.ErrBadAuth},
		{"auth 32 bytes", goodP, enc(append(append([]byte(nil), a...), a...)), ece.ErrBadAuth},
		{"auth bad characters", goodP, "*" + goodA[1:], ece.ErrBadAuth},
		{"auth truncated character", goodP, goodA[:len(goodA)-1], ece.ErrBadAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := ece.ParseKeys(tt.p256dh, tt.auth)
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseKeys error = %v, want %v", err, tt.want)
			}
			if keys != nil {
				t.Errorf("ParseKeys returned keys with error %v", err)
			}
			assertNoSecret(t, err.Error(), tt.p256dh, tt.auth, goodP, goodA)
		})
	}
}

// assertNoSecret fails when msg contains any (long enough) secret or a
// recognisable slice of one.
func assertNoSecret(t *testing.T, msg string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		for i := 0; i+8 <= len(s); i += 4 {
			if strings.Contains(msg, s[i:i+8]) {
				t.Errorf("message %q contains part of a secret", msg)
				return
			}
		}
	}
}

func TestKeysDoNotPrint(t *testing.T) {
	r := loadRFC(t)
	for _, s := range []string{fmt.Sprint(r.keys), fmt.Sprintf("%v", *r.keys), fmt.Sprintf("%+v", r.keys), fmt.Sprintf("%#v", *r.keys)} {
		if diff := cmp.Diff("ece.Keys{redacted}", s); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}
