package vapidtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
)

// Key is a fresh ECDSA P-256 key (a VAPID key, an application server's key) and the encodings
// operators and libraries write it in.
type Key struct {
	Private *ecdsa.PrivateKey
	Scalar  []byte // the 32-byte private scalar
	Public  []byte // the 65-byte uncompressed public point
	SEC1    []byte // the private key as SEC 1 DER (PEM "EC PRIVATE KEY")
	PKCS8   []byte // the private key as PKCS #8 DER (PEM "PRIVATE KEY")
}

// NewKey generates a Key.
func NewKey(t testing.TB) Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{Private: priv}
	if k.Scalar, err = priv.Bytes(); err != nil {
		t.Fatal(err)
	}
	if k.Public, err = priv.PublicKey.Bytes(); err != nil {
		t.Fatal(err)
	}
	if k.SEC1, err = x509.MarshalECPrivateKey(priv); err != nil {
		t.Fatal(err)
	}
	if k.PKCS8, err = x509.MarshalPKCS8PrivateKey(priv); err != nil {
		t.Fatal(err)
	}
	return k
}

// Raw is the private scalar in base64url without padding: the raw key web-push prints.
func (k Key) Raw() string { return base64.RawURLEncoding.EncodeToString(k.Scalar) }

// PublicKey is the public point in base64url without padding: the applicationServerKey
// browsers subscribe with, and the k= of a VAPID header.
func (k Key) PublicKey() string { return base64.RawURLEncoding.EncodeToString(k.Public) }

// SEC1PEM is the private key as a PEM "EC PRIVATE KEY" block, as openssl ecparam writes it.
func (k Key) SEC1PEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k.SEC1}))
}

// PKCS8PEM is the private key as a PEM "PRIVATE KEY" block.
func (k Key) PKCS8PEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k.PKCS8}))
}
