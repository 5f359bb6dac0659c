package ece

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// RFCVector and RFCKeys expose the parsed RFC 8291 Appendix A vector and its
// private keys to the external tests (package ece_test).
var (
	RFCVector = rfcVector
	RFCKeys   = rfcKeys
)

// rfcKeys are the vector's application server and user agent private keys.
func rfcKeys(tb testing.TB, v map[string][]byte) (as, ua *ecdh.PrivateKey) {
	tb.Helper()
	as, err := ecdh.P256().NewPrivateKey(v["as_private"])
	if err != nil {
		tb.Fatal(err)
	}
	ua, err = ecdh.P256().NewPrivateKey(v["ua_private"])
	if err != nil {
		tb.Fatal(err)
	}
	return as, ua
}

// rfcVector reads testdata/rfc8291-appendix-a.txt: blocks of
//
//	name (N bytes)
//	  b64url: ...
//	  hex:    ...
//
// It checks each block against itself (declared length, both encodings)
// so a damaged file fails loudly instead of skewing every test.
func rfcVector(tb testing.TB) map[string][]byte {
	tb.Helper()
	path := filepath.Join("testdata", "rfc8291-appendix-a.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("reading vector: %v", err)
	}
	v := map[string][]byte{}
	var name string
	var size int
	var b64 []byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		switch {
		case strings.HasPrefix(text, "#") || strings.TrimSpace(text) == "":
		case !strings.HasPrefix(text, " "):
			// "name (N bytes)"
			head, rest, ok := strings.Cut(text, " (")
			num, ok2 := strings.CutSuffix(rest, " bytes)")
			n, err := strconv.Atoi(num)
			if !ok || !ok2 || err != nil {
				tb.Fatalf("%s:%d: bad entry header %q", path, line, text)
			}
			name, size, b64 = head, n, nil
		default:
			field, val, ok := strings.Cut(strings.TrimSpace(text), ":")
			val = strings.TrimSpace(val)
			if !ok || name == "" {
				tb.Fatalf("%s:%d: value outside an entry", path, line)
			}
			switch field {
			case "b64url":
				if b64, err = base64.RawURLEncoding.DecodeString(val); err != nil {
					tb.Fatalf("%s:%d: %s: %v", path, line, name, err)
				}
			case "hex":
				b, err := hex.DecodeString(val)
				if err != nil {
					tb.Fatalf("%s:%d: %s: %v", path, line, name, err)
				}
				if len(b) != size || !bytes.Equal(b, b64) {
					tb.Fatalf("%s:%d: %s: hex (%d bytes) disagrees with declared size %d or b64url", path, line, name, len(b), size)
				}
				v[name] = b
			default:
				tb.Fatalf("%s:%d: unknown field %q", path, line, field)
			}
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	for _, want := range []string{"plaintext", "as_public", "as_private", "ua_public", "ua_private", "salt",
		"auth_secret", "ecdh_secret", "PRK_key", "key_info", "IKM", "PRK", "cek_info", "CEK",
		"nonce_info", "NONCE", "header", "ciphertext", "body"} {
		if _, ok := v[want]; !ok {
			tb.Fatalf("%s: missing %s", path, want)
		}
	}
	return v
}

// TestDerivationSteps checks every intermediate of RFC 8291 Appendix A,
// so a failure names the step that went wrong.
func TestDerivationSteps(t *testing.T) {
	v := rfcVector(t)
	as, ua := rfcKeys(t, v)
	ecdhAS, err := as.ECDH(ua.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	ecdhUA, err := ua.ECDH(as.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	pk, err := prkKey(v["auth_secret"], v["ecdh_secret"])
	if err != nil {
		t.Fatal(err)
	}
	ikm, err := webPushIKM(pk, v["ua_public"], v["as_public"])
	if err != nil {
		t.Fatal(err)
	}
	prk, err := contentPRK(v["salt"], ikm)
	if err != nil {
		t.Fatal(err)
	}
	cek, err := contentKey(prk)
	if err != nil {
		t.Fatal(err)
	}
	nonce, err := contentNonce(prk)
	if err != nil {
		t.Fatal(err)
	}
	dCEK, dNonce, err := deriveKeys(v["ecdh_secret"], v["auth_secret"], v["ua_public"], v["as_public"], v["salt"])
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		got  []byte
	}{
		{"as_public", as.PublicKey().Bytes()},
		{"ua_public", ua.PublicKey().Bytes()},
		{"ecdh_secret", ecdhAS},
		{"ecdh_secret", ecdhUA},
		{"key_info", append([]byte(keyInfoPrefix), append(v["ua_public"], v["as_public"]...)...)},
		{"cek_info", []byte(cekInfo)},
		{"nonce_info", []byte(nonceInfo)},
		{"PRK_key", pk},
		{"IKM", ikm},
		{"PRK", prk},
		{"CEK", cek[:]},
		{"NONCE", nonce[:]},
		{"CEK", dCEK[:]},
		{"NONCE", dNonce[:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(hex.EncodeToString(v[tt.name]), hex.EncodeToString(tt.got)); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}
