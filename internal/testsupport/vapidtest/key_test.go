package vapidtest

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
)

// TestKeyEncodingsAreOneKey: every encoding of a Key decodes to its private key.
func TestKeyEncodingsAreOneKey(t *testing.T) {
	k := NewKey(t)
	if len(k.Scalar) != 32 || len(k.Public) != 65 || k.Public[0] != 4 {
		t.Fatalf("scalar of %d bytes, public of %d bytes starting %#x", len(k.Scalar), len(k.Public), k.Public[:1])
	}
	if raw, err := base64.RawURLEncoding.DecodeString(k.Raw()); err != nil || string(raw) != string(k.Scalar) {
		t.Errorf("Raw %q does not decode to the scalar (%v)", k.Raw(), err)
	}
	if pub, err := base64.RawURLEncoding.DecodeString(k.PublicKey()); err != nil || string(pub) != string(k.Public) {
		t.Errorf("PublicKey %q does not decode to the public point (%v)", k.PublicKey(), err)
	}
	for name, text := range map[string]string{"EC PRIVATE KEY": k.SEC1PEM(), "PRIVATE KEY": k.PKCS8PEM()} {
		block, _ := pem.Decode([]byte(text))
		if block == nil || block.Type != name {
			t.Fatalf("%s PEM: %q", name, text)
		}
		var priv any
		var err error
		if name == "EC PRIVATE KEY" {
			priv, err = x509.ParseECPrivateKey(block.Bytes)
		} else {
			priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil || !k.Private.Equal(priv.(*ecdsa.PrivateKey)) {
			t.Errorf("%s PEM is not the key (%v)", name, err)
		}
	}
	if other := NewKey(t); other.Private.Equal(k.Private) {
		t.Error("two new keys are equal")
	}
}
