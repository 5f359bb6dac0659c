package vapid_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// rfcVector is testdata/rfc8292-example.txt, a copy of the RFC 8292
// section 2.4 example.
type rfcVector struct {
	authorization string // value of the Authorization line
	header        string // the "header:" JSON
	claims        string // the "claims:" JSON
	jwkX, jwkY    string
}

func readRFCVector(t *testing.T) rfcVector {
	t.Helper()
	f, err := os.Open("testdata/rfc8292-example.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var v rfcVector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Authorization: "); ok {
			v.authorization = rest
		} else if rest, ok := strings.CutPrefix(line, "header: "); ok {
			v.header = rest
		} else if rest, ok := strings.CutPrefix(line, "claims: "); ok {
			v.claims = rest
		} else if rest, ok := strings.CutPrefix(line, "public key JWK: "); ok {
			for f := range strings.FieldsSeq(rest) {
				if x, ok := strings.CutPrefix(f, "x="); ok {
					v.jwkX = x
				} else if y, ok := strings.CutPrefix(f, "y="); ok {
					v.jwkY = y
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if v.authorization == "" || v.header == "" || v.claims == "" || v.jwkX == "" || v.jwkY == "" {
		t.Fatalf("vector file is missing a line: %+v", v)
	}
	return v
}

// rfcExp is the example's exp: 2016-01-23T04:36:08Z.
var rfcExp = time.Unix(1453523768, 0)

func TestRFC8292Example(t *testing.T) {
	v := readRFCVector(t)
	token, k := splitHeader(t, v.authorization)

	// k is the uncompressed point 0x04 || x || y of the example's JWK.
	x, _ := base64.RawURLEncoding.DecodeString(v.jwkX)
	y, _ := base64.RawURLEncoding.DecodeString(v.jwkY)
	point := append(append([]byte{4}, x...), y...)
	if diff := cmp.Diff(base64.RawURLEncoding.EncodeToString(point), k); diff != "" {
		t.Errorf("k is not the JWK's point (-want +got):\n%s", diff)
	}

	var want jwt.MapClaims
	if err := json.Unmarshal([]byte(v.claims), &want); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		at      time.Time
		wantErr error
	}{
		{name: "one minute before exp", at: rfcExp.Add(-time.Minute)},
		{name: "one second before exp", at: rfcExp.Add(-time.Second)},
		{name: "at exp", at: rfcExp, wantErr: jwt.ErrTokenExpired},
		{name: "today", at: time.Now(), wantErr: jwt.ErrTokenExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			header, claims, err := verifyToken(t, token, k, tc.at)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("verify: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				return
			}
			if diff := cmp.Diff(v.header, header); diff != "" {
				t.Errorf("JOSE header (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, claims); diff != "" {
				t.Errorf("claims (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRFC8292ExampleTamperedFails shows the verification above can fail: a
// flipped claim byte or another key must not verify.
func TestRFC8292ExampleTamperedFails(t *testing.T) {
	v := readRFCVector(t)
	token, k := splitHeader(t, v.authorization)
	other := newTestKey(t, "other")
	parts := strings.Split(token, ".")
	claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(claims), "push.example.net", "push.example.org", 1)
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))

	tests := []struct {
		name, token, k string
	}{
		{name: "claims changed", token: strings.Join(parts, "."), k: k},
		{name: "another key", token: token, k: other.PublicKey()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := verifyToken(t, tc.token, tc.k, rfcExp.Add(-time.Minute))
			if !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
				t.Fatalf("err = %v, want %v", err, jwt.ErrTokenSignatureInvalid)
			}
		})
	}
}

// TestSignedInputMatchesRFC: with the example's aud, exp and sub our token's
// header and claims segments are the RFC's byte for byte (only the ECDSA
// signature, which is randomised, differs).
func TestSignedInputMatchesRFC(t *testing.T) {
	v := readRFCVector(t)
	rfcToken, _ := splitHeader(t, v.authorization)
	key := newTestKey(t, "rfc")
	s, err := vapid.NewSigner(vapid.SignerOptions{
		Subject: "mailto:push@example.com",
		Now:     func() time.Time { return rfcExp.Add(-vapid.DefaultLifetime) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.Header(key, "https://push.example.net", 0)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := splitHeader(t, h)
	signingInput := func(tok string) string { return tok[:strings.LastIndexByte(tok, '.')] }
	if diff := cmp.Diff(signingInput(rfcToken), signingInput(token)); diff != "" {
		t.Errorf("signing input (-want +got):\n%s", diff)
	}
}
