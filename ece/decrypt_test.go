package ece_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/ece"
)

// refSeal is an independent aes128gcm sealer written straight from RFC 8291
// with crypto/hkdf: it lets tests build bodies our Encrypt never makes
// (wrong delimiter, odd record sizes) and cross-checks our derivation.
// record is the full plaintext record including delimiter and padding.
func refSeal(tb testing.TB, uaPub, auth, salt []byte, as *ecdh.PrivateKey, rs uint32, record []byte) []byte {
	tb.Helper()
	secret := refECDH(tb, as, uaPub)
	gcm, nonce := refAEAD(tb, secret, uaPub, as.PublicKey().Bytes(), auth, salt)
	hdr := make([]byte, 0, ece.HeaderSize)
	hdr = append(hdr, salt...)
	hdr = binary.BigEndian.AppendUint32(hdr, rs)
	hdr = append(hdr, 65)
	hdr = append(hdr, as.PublicKey().Bytes()...)
	return gcm.Seal(hdr, nonce, record, nil)
}

// refECDH is the secret priv shares with the holder of the uncompressed P-256 point peer.
func refECDH(tb testing.TB, priv *ecdh.PrivateKey, peer []byte) []byte {
	tb.Helper()
	pub, err := ecdh.P256().NewPublicKey(peer)
	if err != nil {
		tb.Fatal(err)
	}
	secret, err := priv.ECDH(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return secret
}

// refOpen decrypts a body with the reference derivation and returns the
// raw record (delimiter and padding included).
func refOpen(tb testing.TB, body []byte, ua *ecdh.PrivateKey, auth []byte) []byte {
	tb.Helper()
	asPub := body[21:86]
	secret := refECDH(tb, ua, asPub)
	gcm, nonce := refAEAD(tb, secret, ua.PublicKey().Bytes(), asPub, auth, body[:16])
	rec, err := gcm.Open(nil, nonce, body[86:], nil)
	if err != nil {
		tb.Fatalf("reference open: %v", err)
	}
	return rec
}

// refAEAD derives CEK and NONCE as RFC 8291 section 3.4 spells them.
func refAEAD(tb testing.TB, secret, uaPub, asPub, auth, salt []byte) (cipher.AEAD, []byte) {
	tb.Helper()
	info := append(append([]byte("WebPush: info\x00"), uaPub...), asPub...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(info), 32)
	if err != nil {
		tb.Fatal(err)
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		tb.Fatal(err)
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		tb.Fatal(err)
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		tb.Fatal(err)
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		tb.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		tb.Fatal(err)
	}
	return gcm, nonce
}

// TestEncryptMatchesReference: our Encrypt opened by the independent
// reference gives plaintext||0x02||zero padding.
func TestEncryptMatchesReference(t *testing.T) {
	ua, auth, keys := uaKeys(t)
	tests := []struct {
		name   string
		n, pad int
	}{
		{"empty", 0, 0},
		{"small", 32, 0},
		{"padded", 100, 50},
		{"max", ece.MaxPlaintext, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := payload(tt.n)
			body, err := ece.Encrypt(keys, pt, ece.Options{Pad: tt.pad})
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(bytes.Clone(pt), 2), make([]byte, tt.pad)...)
			if diff := cmp.Diff(want, refOpen(t, body, ua, auth)); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(uint32(4096), binary.BigEndian.Uint32(body[16:20])); diff != "" {
				t.Errorf("rs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecryptRecords(t *testing.T) {
	ua, auth, _ := uaKeys(t)
	as, err := ecdh.P256().GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	uaPub := ua.PublicKey().Bytes()
	salt := bytes.Repeat([]byte{7}, 16)
	seal := func(rs uint32, record []byte) []byte {
		return refSeal(t, uaPub, auth, salt, as, rs, record)
	}
	tests := []struct {
		name    string
		body    []byte
		want    []byte
		wantErr error
	}{
		{"plain", seal(4096, []byte("hi\x02")), []byte("hi"), nil},
		{"padded", seal(4096, []byte("hi\x02\x00\x00\x00")), []byte("hi"), nil},
		{"empty", seal(4096, []byte{2}), []byte{}, nil},
		{"small record size", seal(20, []byte("abc\x02")), []byte("abc"), nil},
		{"record size exactly fits", seal(21, []byte("abcd\x02")), []byte("abcd"), nil},
		{"huge record size", seal(0xffffffff, []byte("x\x02")), []byte("x"), nil},
		{"non-final delimiter", seal(4096, []byte("hi\x01")), nil, ece.ErrDecrypt},
		{"no delimiter", seal(4096, []byte("hi")), nil, ece.ErrDecrypt},
		{"all zero record", seal(4096, []byte{0, 0, 0}), nil, ece.ErrDecrypt},
		{"bad byte after delimiter", seal(4096, []byte("hi\x02\x00\x05")), nil, ece.ErrDecrypt},
		{"empty record", seal(4096, nil), nil, ece.ErrDecrypt},
		{"record size 17", seal(17, []byte{2}), nil, ece.ErrDecrypt},
		{"record over record size (two records)", seal(18, []byte("abcd\x02")), nil, ece.ErrDecrypt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ece.Decrypt(tt.body, ua, auth)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Decrypt error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecryptRejects(t *testing.T) {
	r := loadRFC(t)
	body := r.v["body"]
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(body)
		f(b)
		return b
	}
	other, err := ecdh.P256().GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdh.P384().GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body []byte
		ua   *ecdh.PrivateKey
		auth []byte
		want error
	}{
		{"empty", nil, r.ua, r.auth, ece.ErrDecrypt},
		{"salt only", body[:16], r.ua, r.auth, ece.ErrDecrypt},
		{"up to idlen", body[:21], r.ua, r.auth, ece.ErrDecrypt},
		{"header cut in key id", body[:50], r.ua, r.auth, ece.ErrDecrypt},
		{"header only", body[:86], r.ua, r.auth, ece.ErrDecrypt},
		{"tag only", body[:86+16], r.ua, r.auth, ece.ErrDecrypt},
		{"one byte short", body[:len(body)-1], r.ua, r.auth, ece.ErrDecrypt},
		{"one byte extra", append(bytes.Clone(body), 0), r.ua, r.auth, ece.ErrDecrypt},
		{"idlen 0", edit(func(b []byte) { b[20] = 0 }), r.ua, r.auth, ece.ErrDecrypt},
		{"idlen 64", edit(func(b []byte) { b[20] = 64 }), r.ua, r.auth, ece.ErrDecrypt},
		{"idlen 255", edit(func(b []byte) { b[20] = 255 }), r.ua, r.auth, ece.ErrDecrypt},
		{"rs 0", edit(func(b []byte) { copy(b[16:20], []byte{0, 0, 0, 0}) }), r.ua, r.auth, ece.ErrDecrypt},
		{"rs below record", edit(func(b []byte) { copy(b[16:20], []byte{0, 0, 0, 40}) }), r.ua, r.auth, ece.ErrDecrypt},
		{"rs changed (not authenticated, but fits)", edit(func(b []byte) { b[18] = 0x20 }), r.ua, r.auth, nil},
		{"key id compressed marker", edit(func(b []byte) { b[21] = 2 }), r.ua, r.auth, ece.ErrDecrypt},
		{"key id off curve", edit(func(b []byte) { b[85] ^= 1 }), r.ua, r.auth, ece.ErrDecrypt},
		{"key id zero", edit(func(b []byte) { clear(b[21:86]) }), r.ua, r.auth, ece.ErrDecrypt},
		{"salt flipped", edit(func(b []byte) { b[0] ^= 1 }), r.ua, r.auth, ece.ErrDecrypt},
		{"ciphertext flipped", edit(func(b []byte) { b[90] ^= 1 }), r.ua, r.auth, ece.ErrDecrypt},
		{"tag flipped", edit(func(b []byte) { b[len(b)-1] ^= 1 }), r.ua, r.auth, ece.ErrDecrypt},
		{"wrong auth", body, r.ua, bytes.Repeat([]byte{1}, 16), ece.ErrDecrypt},
		{"wrong private key", body, other, r.auth, ece.ErrDecrypt},
		{"nil private key", body, nil, r.auth, ece.ErrDecrypt},
		{"P-384 private key", body, p384, r.auth, ece.ErrDecrypt},
		{"auth 15 bytes", body, r.ua, r.auth[:15], ece.ErrBadAuth},
		{"auth 17 bytes", body, r.ua, append(bytes.Clone(r.auth), 0), ece.ErrBadAuth},
		{"auth nil", body, r.ua, nil, ece.ErrBadAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := bytes.Clone(tt.body)
			got, err := ece.Decrypt(tt.body, tt.ua, tt.auth)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decrypt error = %v, want %v", err, tt.want)
			}
			if !bytes.Equal(before, tt.body) {
				t.Error("Decrypt modified its input")
			}
			if err == nil {
				if diff := cmp.Diff(string(r.v["plaintext"]), string(got)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if got != nil {
				t.Errorf("Decrypt returned %d bytes with an error", len(got))
			}
			assertNoSecret(t, err.Error(), string(r.v["plaintext"]), b64url(r.auth), b64url(r.v["ua_private"]))
		})
	}
}

// TestReferenceMatchesRFC keeps the reference sealer honest.
func TestReferenceMatchesRFC(t *testing.T) {
	r := loadRFC(t)
	got := refSeal(t, r.v["ua_public"], r.auth, r.v["salt"], r.as, 4096, append(bytes.Clone(r.v["plaintext"]), 2))
	if diff := cmp.Diff(r.v["body"], got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
