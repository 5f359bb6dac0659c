package vapid_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func mustPEM(t *testing.T, typ string, der []byte, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// secretForms are encodings of a private scalar that must never appear in
// an error or in printed output.
func secretForms(raw []byte) []string {
	return []string{
		base64.RawURLEncoding.EncodeToString(raw),
		base64.StdEncoding.EncodeToString(raw),
		hex.EncodeToString(raw),
		strings.ToUpper(hex.EncodeToString(raw)),
		new(big.Int).SetBytes(raw).String(),
	}
}

// assertNoLeak fails when s contains any secret, or any 12-byte run of an
// input line (PEM body or raw key) longer than that.
func assertNoLeak(t *testing.T, s string, input string, secrets []string) {
	t.Helper()
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			t.Errorf("output %q contains key material", s)
		}
	}
	for line := range strings.Lines(input) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "-----") {
			continue
		}
		for i := 0; i+12 <= len(line); i += 6 {
			if strings.Contains(s, line[i:i+12]) {
				t.Errorf("output %q quotes the input (%q)", s, line[i:i+12])
				return
			}
		}
	}
}

func TestParseKey(t *testing.T) {
	k := vapidtest.NewKey(t)
	p256, raw := k.Private, k.Scalar
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	wpPriv, wpPub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	pubBytes := k.Public

	sec1DER, sec1 := k.SEC1, k.SEC1PEM()
	pkcs8DER, pkcs8 := k.PKCS8, k.PKCS8PEM()
	// What `openssl ecparam -name prime256v1 -genkey` prints.
	ecParams := "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
	p384SEC1, err384 := x509.MarshalECPrivateKey(p384)
	p384PKCS8, err384p := x509.MarshalPKCS8PrivateKey(p384)
	rsaPKCS8, errRSA := x509.MarshalPKCS8PrivateKey(rsaKey)
	edPKCS8, errEd := x509.MarshalPKCS8PrivateKey(edKey)
	pkix, errPKIX := x509.MarshalPKIXPublicKey(&p256.PublicKey)
	legacyEncrypted := string(pem.EncodeToMemory(&pem.Block{
		Type:    "EC PRIVATE KEY",
		Headers: map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00112233445566778899AABBCCDDEEFF"},
		Bytes:   sec1DER,
	}))
	order := elliptic.P256().Params().N.Bytes()

	want := k.PublicKey()
	tests := []struct {
		name    string
		data    string
		want    string // public key; "" when an error is expected
		wantErr string // substring of the error
	}{
		{name: "SEC1 PEM", data: sec1, want: want},
		{name: "SEC1 PEM after EC PARAMETERS", data: ecParams + sec1, want: want},
		{name: "PKCS#8 PEM", data: pkcs8, want: want},
		{name: "PKCS#8 PEM with CRLF and indentation", data: "\r\n  " + strings.ReplaceAll(pkcs8, "\n", "\r\n"), want: want},
		{name: "raw base64url", data: base64.RawURLEncoding.EncodeToString(raw), want: want},
		{name: "raw base64url padded", data: base64.URLEncoding.EncodeToString(raw), want: want},
		{name: "raw std base64 padded", data: base64.StdEncoding.EncodeToString(raw), want: want},
		{name: "raw std base64 unpadded", data: base64.RawStdEncoding.EncodeToString(raw), want: want},
		{name: "raw with surrounding whitespace", data: "\n\t " + base64.RawURLEncoding.EncodeToString(raw) + " \n", want: want},
		{name: "webpush-go GenerateVAPIDKeys", data: wpPriv, want: wpPub},

		{name: "P-384 SEC1", data: mustPEM(t, "EC PRIVATE KEY", p384SEC1, err384), wantErr: "curve P-384; VAPID needs P-256"},
		{name: "P-384 PKCS#8", data: mustPEM(t, "PRIVATE KEY", p384PKCS8, err384p), wantErr: "curve P-384; VAPID needs P-256"},
		{name: "RSA PKCS#8", data: mustPEM(t, "PRIVATE KEY", rsaPKCS8, errRSA), wantErr: "PKCS#8 key is RSA"},
		{name: "RSA PKCS#1", data: mustPEM(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey), nil), wantErr: "is an RSA key"},
		{name: "Ed25519 PKCS#8", data: mustPEM(t, "PRIVATE KEY", edPKCS8, errEd), wantErr: "PKCS#8 key is Ed25519"},
		{name: "public key PEM", data: mustPEM(t, "PUBLIC KEY", pkix, errPKIX), wantErr: "is a public key"},
		{name: "encrypted PKCS#8", data: mustPEM(t, "ENCRYPTED PRIVATE KEY", pkcs8DER, nil), wantErr: "encrypted PKCS#8"},
		{name: "legacy encrypted PEM", data: legacyEncrypted, wantErr: "is encrypted"},
		{name: "certificate PEM", data: mustPEM(t, "CERTIFICATE", sec1DER, nil), wantErr: `"CERTIFICATE" is not a private key`},
		{name: "SEC1 label on PKCS#8 bytes", data: mustPEM(t, "EC PRIVATE KEY", pkcs8DER, nil), wantErr: "is not a SEC1 key"},
		{name: "PKCS#8 label on garbage", data: mustPEM(t, "PRIVATE KEY", []byte("not DER at all, just text"), nil), wantErr: "is not a PKCS#8 key"},
		{name: "truncated PEM", data: strings.Join(strings.Split(sec1, "\n")[:2], "\n"), wantErr: "no private key PEM block"},
		{name: "raw public key", data: base64.RawURLEncoding.EncodeToString(pubBytes), wantErr: "65-byte uncompressed public key"},
		{name: "raw 31 bytes", data: base64.RawURLEncoding.EncodeToString(raw[:31]), wantErr: "decodes to 31 bytes"},
		{name: "raw zero scalar", data: base64.RawURLEncoding.EncodeToString(make([]byte, 32)), wantErr: "not a valid P-256 private scalar"},
		{name: "raw group order", data: base64.RawURLEncoding.EncodeToString(order), wantErr: "not a valid P-256 private scalar"},
		{name: "garbage", data: "this is not a key at all!", wantErr: "not PEM and not a base64 private key"},
		{name: "empty", data: "", wantErr: "empty key"},
		{name: "whitespace only", data: " \n\t", wantErr: "empty key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := vapid.ParseKey("main", []byte(tc.data))
			if tc.wantErr != "" {
				if !errors.Is(err, vapid.ErrBadKey) {
					t.Fatalf("err = %v, want %v", err, vapid.ErrBadKey)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantErr)
				}
				assertNoLeak(t, err.Error(), tc.data, secretForms(raw))
				return
			}
			if err != nil {
				t.Fatalf("ParseKey: %v", err)
			}
			if diff := cmp.Diff(tc.want, k.PublicKey()); diff != "" {
				t.Errorf("PublicKey (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff("main", k.Name()); diff != "" {
				t.Errorf("Name (-want +got):\n%s", diff)
			}
		})
	}
}

// A generated key marshals to PEM (PKCS#8) and to the raw scalar, and both parse back to it.
func TestGenerateKeyMarshalRoundTrip(t *testing.T) {
	k := newTestKey(t, "gen")
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(pemBytes)
	if block == nil || len(strings.TrimSpace(string(rest))) != 0 {
		t.Fatalf("MarshalPEM did not produce exactly one PEM block")
	}
	if diff := cmp.Diff("PRIVATE KEY", block.Type); diff != "" {
		t.Errorf("PEM type (-want +got):\n%s", diff)
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		t.Errorf("block is not PKCS#8: %v", err)
	}
	back, err := vapid.ParseKey("gen", pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k.PublicKey(), back.PublicKey()); diff != "" {
		t.Errorf("public key after round trip (-want +got):\n%s", diff)
	}
	pub, _ := base64.RawURLEncoding.DecodeString(k.PublicKey())
	if len(pub) != 65 || pub[0] != 4 {
		t.Errorf("PublicKey decodes to %d bytes starting %#x, want 65 starting 0x04", len(pub), pub[:1])
	}
	raw, err := k.MarshalRaw()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := base64.RawURLEncoding.DecodeString(raw); err != nil || len(b) != 32 {
		t.Fatalf("MarshalRaw is %d bytes of base64url (%v), want the 32-byte scalar", len(b), err)
	}
	if back, err := vapid.ParseKey("gen", []byte(raw)); err != nil || back.PublicKey() != k.PublicKey() {
		t.Errorf("MarshalRaw parses back to %v (%v), want the key of public key %s", back, err, k.PublicKey())
	}
	if _, err := (*vapid.Key)(nil).MarshalRaw(); !errors.Is(err, vapid.ErrBadKey) {
		t.Errorf("MarshalRaw of a nil key: %v, want ErrBadKey", err)
	}
	other := newTestKey(t, "gen")
	if other.PublicKey() == k.PublicKey() {
		t.Errorf("two generated keys are equal")
	}
}

func TestLoadKeyFile(t *testing.T) {
	k := newTestKey(t, "file")
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	raw := vapidtest.NewKey(t)
	rawKey, rawPublic := raw.Raw(), raw.PublicKey()
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		want    string
		wantIs  error
		wantErr string
	}{
		{name: "PKCS#8 file 0600", path: write("key.pem", pemBytes, 0o600), want: k.PublicKey()},
		// Permissions are documented, not enforced.
		{name: "world-readable file loads", path: write("open.pem", pemBytes, 0o644), want: k.PublicKey()},
		{name: "missing file", path: filepath.Join(dir, "nope.pem"), wantIs: fs.ErrNotExist,
			wantErr: `vapid: bad key: "file": not a readable file (no such file or directory) nor a valid raw key (not PEM and not a base64 private key: illegal base64 data at input byte `},
		{name: "missing file is ErrBadKey too", path: filepath.Join(dir, "nope.pem"), wantIs: vapid.ErrBadKey, wantErr: "; want the path of a PEM key file, or the raw 32-byte private key in base64url"},
		{name: "garbage file", path: write("bad.pem", []byte("hello"), 0o600), wantIs: vapid.ErrBadKey,
			wantErr: `vapid: bad key: "file": the file holds no usable key: not PEM and not a base64 private key`},
		{name: "a directory", path: dir, wantIs: vapid.ErrBadKey, wantErr: `"file": not a readable file (is a directory) nor a valid raw key`},
		{name: "a file too large to be a key", path: write("big.pem", make([]byte, 64<<10+1), 0o600), wantIs: vapid.ErrBadKey,
			wantErr: `"file": not a readable file (larger than 65536 bytes) nor a valid raw key`},
		{name: "the raw key itself", path: rawKey, want: rawPublic},
		{name: "PEM text itself", path: string(pemBytes), want: k.PublicKey()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vapid.LoadKeyFile("file", tc.path)
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) {
					t.Fatalf("err = %v, want %v", err, tc.wantIs)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantErr)
				}
				// The value may be a key: not even a path is repeated.
				if strings.Contains(err.Error(), tc.path) {
					t.Errorf("err = %q repeats the value %q", err, tc.path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.PublicKey()); diff != "" {
				t.Errorf("PublicKey (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKeyNeverPrintsPrivate formats a Key every way fmt can reach it.
func TestKeyNeverPrintsPrivate(t *testing.T) {
	key := vapidtest.NewKey(t)
	raw := key.Scalar
	k, err := vapid.ParseKey("main", []byte(key.Raw()))
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	secrets := secretForms(raw)
	for line := range strings.Lines(string(pemBytes)) {
		if !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, strings.TrimSpace(line))
		}
	}
	printable := fmt.Sprintf("vapid.Key{name: %q, public: %q}", "main", k.PublicKey())

	values := []struct {
		name string
		v    any
	}{
		{"pointer", k},
		{"value", *k},
		{"exported pointer field", struct{ K *vapid.Key }{k}},
		{"exported value field", struct{ K vapid.Key }{*k}},
		// fmt cannot call methods on unexported fields and dumps them raw.
		{"unexported value field", struct{ k vapid.Key }{*k}},
		{"slice", []*vapid.Key{k}},
		{"map", map[string]vapid.Key{"a": *k}},
	}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"}
	for _, val := range values {
		for _, verb := range verbs {
			t.Run(val.name+" "+verb, func(t *testing.T) {
				out := fmt.Sprintf(verb, val.v)
				for _, sec := range secrets {
					if strings.Contains(out, sec) {
						t.Fatalf("%s of %s prints private key material: %s", verb, val.name, out)
					}
				}
			})
		}
	}

	exact := []struct {
		name string
		got  string
		want string
	}{
		{"%v", fmt.Sprintf("%v", k), printable},
		{"%+v", fmt.Sprintf("%+v", k), printable},
		{"%#v", fmt.Sprintf("%#v", k), printable},
		{"%s value", fmt.Sprintf("%s", *k), printable},
		{"Sprint", fmt.Sprint(k), printable},
		{"String", k.String(), printable},
		{"GoString", k.GoString(), printable},
	}
	for _, tc := range exact {
		t.Run("exact "+tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
