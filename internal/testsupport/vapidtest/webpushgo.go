package vapidtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"math/big"
	"net/url"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// WebpushGoVAPIDHeader is the Authorization header github.com/SherClockHolmes/webpush-go v1.4.0
// builds for every message (it keeps no cache), replayed from its unexported
// getVAPIDAuthorizationHeader step by step: parse the endpoint, build the claims, decode the
// base64 private key, rebuild the ECDSA key with ScalarMult, sign ES256 with golang-jwt, decode
// and re-encode the public key. Benchmarks of this project's signing and encryption compare
// against it; privateKey and publicKey are what webpush.GenerateVAPIDKeys returns.
func WebpushGoVAPIDHeader(endpoint, subject, privateKey, publicKey string) (string, error) {
	subURL, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	token := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"aud": subURL.Scheme + "://" + subURL.Host,
		"exp": time.Now().Add(12 * time.Hour).Unix(),
		"sub": subject,
	})
	d, err := decodeVAPIDKey(privateKey)
	if err != nil {
		return "", err
	}
	curve := elliptic.P256()
	//lint:ignore SA1019 the replay of webpush-go keeps its deprecated calls, which are what it costs
	px, py := curve.ScalarMult(curve.Params().Gx, curve.Params().Gy, d)
	//lint:ignore SA1019 as above: webpush-go fills the deprecated fields
	priv := &ecdsa.PrivateKey{PublicKey: ecdsa.PublicKey{Curve: curve, X: px, Y: py}, D: new(big.Int).SetBytes(d)}
	signed, err := token.SignedString(priv)
	if err != nil {
		return "", err
	}
	pub, err := decodeVAPIDKey(publicKey)
	if err != nil {
		return "", err
	}
	return "vapid t=" + signed + ", k=" + base64.RawURLEncoding.EncodeToString(pub), nil
}

// decodeVAPIDKey is webpush-go's decodeVapidKey: padded base64url, else unpadded.
func decodeVAPIDKey(k string) ([]byte, error) {
	if v, err := base64.URLEncoding.DecodeString(k); err == nil {
		return v, nil
	}
	return base64.RawURLEncoding.DecodeString(k)
}
