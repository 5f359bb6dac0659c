package ece_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

// FuzzDecrypt: arbitrary bodies never panic, fail only with ErrDecrypt
// and never echo the body in the error. Seeds are valid bodies (which
// the fuzzer mutates field by field) and their truncations.
func FuzzDecrypt(f *testing.F) {
	r := loadRFC(f)
	f.Add(r.v["body"])
	for _, pad := range []int{0, 1, 200} {
		opts := r.opts()
		opts.Pad = pad
		body, err := ece.Encrypt(r.keys, []byte("fuzz seed"), opts)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	for _, n := range []int{0, 1, 20, 21, 85, 86, 87, 102, 103} {
		f.Add(bytes.Clone(r.v["body"][:n]))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := bytes.Clone(body)
		pt, err := ece.Decrypt(body, r.ua, r.auth)
		if !bytes.Equal(before, body) {
			t.Fatal("Decrypt modified its input")
		}
		if err != nil {
			// Each is a fixed value wrapping ErrDecrypt, so its text
			// cannot depend on (or echo) the body.
			if !errors.Is(err, ece.ErrDecrypt) || !slices.Contains(ece.DecryptErrors, err) {
				t.Fatalf("error %v is not one of the fixed ErrDecrypt values", err)
			}
			if pt != nil {
				t.Fatal("plaintext returned with an error")
			}
			return
		}
		if max := len(body) - ece.HeaderSize - 17; len(pt) > max {
			t.Fatalf("plaintext of %d bytes from a %d-byte body", len(pt), len(body))
		}
	})
}

// FuzzParseKeys: arbitrary key strings never panic, fail only with fixed
// errors (which cannot echo the input) and any accepted keys encrypt.
func FuzzParseKeys(f *testing.F) {
	r := loadRFC(f)
	p, a := r.v["ua_public"], r.v["auth_secret"]
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		f.Add(enc.EncodeToString(p), enc.EncodeToString(a))
	}
	f.Add("", "")
	f.Add(" "+base64.RawURLEncoding.EncodeToString(p[:33])+" ", "====")
	f.Add(strings.Repeat("A", 87), strings.Repeat("_", 22))
	f.Fuzz(func(t *testing.T, p256dh, auth string) {
		keys, err := ece.ParseKeys(p256dh, auth)
		if err != nil {
			// A fixed value cannot echo the key text.
			if !slices.Contains(ece.KeyErrors, err) ||
				!errors.Is(err, ece.ErrBadP256dh) && !errors.Is(err, ece.ErrBadAuth) {
				t.Fatalf("error %v is not one of the fixed key errors", err)
			}
			if keys != nil {
				t.Fatal("keys returned with an error")
			}
			return
		}
		body, err := ece.Encrypt(keys, []byte("x"), ece.Options{})
		if err != nil {
			t.Fatalf("accepted keys do not encrypt: %v", err)
		}
		if len(body) != ece.HeaderSize+1+1+16 {
			t.Fatalf("body of %d bytes", len(body))
		}
	})
}
