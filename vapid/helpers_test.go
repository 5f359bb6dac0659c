package vapid_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// t0 is a whole second so exp = t0 + lifetime exactly.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// splitHeader parses "vapid t=<jwt>, k=<key>" the way a push service does.
func splitHeader(t *testing.T, h string) (token, k string) {
	t.Helper()
	rest, ok := strings.CutPrefix(h, "vapid t=")
	if !ok {
		t.Fatalf("header %q does not start with %q", h, "vapid t=")
	}
	token, k, ok = strings.Cut(rest, ", k=")
	if !ok {
		t.Fatalf("header %q has no %q", h, ", k=")
	}
	return token, k
}

// verifyToken checks the ES256 signature with the public key k (base64url
// uncompressed point) and the exp claim at the instant at, using jwt/v5 as a
// push service would, and returns the JOSE header (raw JSON) and claims.
func verifyToken(t *testing.T, token, k string, at time.Time) (string, jwt.MapClaims, error) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil {
		t.Fatalf("k is not base64url: %v", err)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		t.Fatalf("k is not a P-256 point: %v", err)
	}
	seg, _, _ := strings.Cut(token, ".")
	header, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatalf("JOSE header is not base64url: %v", err)
	}
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(token, claims,
		func(*jwt.Token) (any, error) { return pub, nil },
		jwt.WithValidMethods([]string{"ES256"}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return at }),
	)
	return string(header), claims, err
}

// wantClaims is the MapClaims a JSON decode of aud/exp/sub yields.
func wantClaims(aud string, exp time.Time, sub string) jwt.MapClaims {
	return jwt.MapClaims{"aud": aud, "exp": float64(exp.Unix()), "sub": sub}
}
