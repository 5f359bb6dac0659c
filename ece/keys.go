package ece

import (
	"crypto/ecdh"
	"encoding/base64"
	"strings"
)

// maxEncodedKey bounds the base64 text we look at: a padded 65-byte key is
// 88 characters. Anything longer is refused before decoding.
const maxEncodedKey = 128

// ParseKeys parses a subscription's p256dh and auth values as browsers hand
// them out (PushSubscription.toJSON: base64url without padding) and as
// libraries often store them (standard base64, padded). Surrounding white
// space is ignored. p256dh must be a 65-byte uncompressed point on P-256
// (ErrBadP256dh); auth must be 16 bytes (ErrBadAuth). Errors never include
// the key material.
func ParseKeys(p256dh, auth string) (*Keys, error) {
	k := new(Keys)
	n, ok := decodeKey(k.p256[:], p256dh)
	if !ok || n != pubKeySize {
		return nil, errP256dhEncoding
	}
	// NewPublicKey rejects compressed points, the point at infinity and
	// points off the curve.
	pub, err := ecdh.P256().NewPublicKey(k.p256[:])
	if err != nil {
		return nil, errP256dhPoint
	}
	n, ok = decodeKey(k.auth[:], auth)
	if !ok || n != authSize {
		return nil, errAuthEncoding
	}
	k.pub = pub
	k.valid = true
	return k, nil
}

// decodeKey decodes s into dst, choosing the alphabet and padding from
// what s contains. It reports false for invalid text or a result that
// does not fit dst exactly or is longer (n is only meaningful when ok).
// Decoding goes through stack buffers: ParseKeys runs once per message.
func decodeKey(dst []byte, s string) (n int, ok bool) {
	s = strings.TrimSpace(s)
	if len(s) == 0 || len(s) > maxEncodedKey {
		return 0, false
	}
	var src [maxEncodedKey]byte
	copy(src[:], s)
	std := strings.ContainsAny(s, "+/")
	padded := strings.HasSuffix(s, "=")
	var enc *base64.Encoding
	switch {
	case std && padded:
		enc = base64.StdEncoding
	case std:
		enc = base64.RawStdEncoding
	case padded:
		enc = base64.URLEncoding
	default:
		enc = base64.RawURLEncoding
	}
	// Decode into a scratch buffer big enough for any input we accept, so a
	// too-long key is reported as a wrong length rather than overrunning dst.
	var out [maxEncodedKey]byte
	n, err := enc.Decode(out[:], src[:len(s)])
	if err != nil || n != len(dst) {
		clear(out[:])
		return n, false
	}
	copy(dst, out[:n])
	clear(out[:])
	return n, true
}

var (
	errP256dhEncoding = wrap(ErrBadP256dh, "not 65 bytes of base64 or base64url")
	errP256dhPoint    = wrap(ErrBadP256dh, "not an uncompressed point on P-256")
	errAuthEncoding   = wrap(ErrBadAuth, "not 16 bytes of base64 or base64url")
)
