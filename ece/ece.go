// Package ece encrypts Web Push message bodies with the aes128gcm content
// coding of RFC 8188, keyed as RFC 8291 prescribes (ECDH on P-256 with the
// subscription's p256dh key, HKDF-SHA-256 with its auth secret).
//
// Web Push sends exactly one record per message, so this package writes and
// reads a single record: an 86-byte header (salt, record size, the sender's
// ephemeral public key) followed by the AES-128-GCM sealed plaintext. Encrypt
// is the gateway's hot path; Decrypt is what a user agent does and exists for
// the push service simulator and for tests.
package ece

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

const (
	// MaxBodySize is the largest body every push service must accept
	// (RFC 8030 section 7.2); it is also the record size we advertise.
	MaxBodySize = 4096
	// HeaderSize is the aes128gcm header for a P-256 key id:
	// salt 16 + rs 4 + idlen 1 + keyid 65.
	HeaderSize = 86
	// MaxPlaintext is the largest payload that fits MaxBodySize with no
	// padding: 4096 - 86 header - 1 delimiter - 16 tag.
	MaxPlaintext = MaxBodySize - HeaderSize - 1 - tagSize
)

const (
	saltSize   = 16
	authSize   = 16
	pubKeySize = 65 // uncompressed P-256 point
	tagSize    = 16
	keySize    = 16 // AES-128
	nonceSize  = 12
	recordSize = MaxBodySize
	// delimiter marks the end of the plaintext in the last (here: only)
	// record; anything after it is zero padding.
	delimiter = 0x02
)

var (
	// ErrBadP256dh reports a p256dh key that is not an uncompressed P-256
	// point on the curve (or keys that did not come from ParseKeys).
	ErrBadP256dh = errors.New("ece: bad p256dh key")
	// ErrBadAuth reports an auth secret that is not exactly 16 bytes.
	ErrBadAuth = errors.New("ece: bad auth secret")
	// ErrPayloadTooLarge reports a plaintext (plus padding) that would make
	// the body exceed MaxBodySize.
	ErrPayloadTooLarge = errors.New("ece: payload too large")
	// ErrDecrypt reports a body that cannot be decrypted: malformed header,
	// wrong keys, failed authentication or bad padding.
	ErrDecrypt = errors.New("ece: decryption failed")
	// ErrBadOptions reports an Options value Encrypt cannot use (a salt
	// that is not 16 bytes, a negative Pad, an ephemeral key not on P-256).
	ErrBadOptions = errors.New("ece: bad options")
)

// Keys are a subscription's parsed keys. The UA public key is parsed and
// checked once here so that every Encrypt can reuse it. A Keys value is
// immutable and safe for concurrent use.
type Keys struct {
	pub   *ecdh.PublicKey
	p256  [pubKeySize]byte
	auth  [authSize]byte
	valid bool
}

// String keeps key material out of logs and error messages that print a
// Keys value by accident.
// Value receivers cover both Keys and *Keys.
func (Keys) String() string { return "ece.Keys{redacted}" }

// GoString is String for %#v.
func (k Keys) GoString() string { return k.String() }

// Options tune one Encrypt call. The zero value is what production uses.
type Options struct {
	// Pad is the number of zero bytes added after the delimiter; 0 by
	// default, because some services refuse bodies padded to 4096 bytes.
	Pad int
	// EphemeralKey is the sender's P-256 key pair; nil means a fresh key
	// pair per message. Tests inject the RFC's. (Since Go 1.26
	// ecdh.GenerateKey ignores its rand argument, so this is the only way
	// to get a deterministic key.)
	EphemeralKey *ecdh.PrivateKey
	// Salt is the 16-byte HKDF salt; nil means 16 bytes read from Rand.
	Salt []byte
	// Rand is the source for the salt; nil means crypto/rand.
	Rand io.Reader
}

// Encrypt returns the aes128gcm body (header and one record) carrying
// plaintext to the subscription whose keys are given.
func Encrypt(keys *Keys, plaintext []byte, opts Options) ([]byte, error) {
	return AppendEncrypt(nil, keys, plaintext, opts)
}

// AppendEncrypt is Encrypt writing into dst: it appends the body to dst and
// returns the extended slice, so a caller can reuse one buffer per worker.
// plaintext must not overlap dst's spare capacity. On error dst is returned
// unchanged (same length).
func AppendEncrypt(dst []byte, keys *Keys, plaintext []byte, opts Options) ([]byte, error) {
	if keys == nil || !keys.valid {
		return dst, errNoKeys
	}
	if opts.Pad < 0 {
		return dst, errNegativePad
	}
	if opts.Salt != nil && len(opts.Salt) != saltSize {
		return dst, errSaltSize
	}
	if opts.EphemeralKey != nil && opts.EphemeralKey.Curve() != ecdh.P256() {
		return dst, errEphemeralCurve
	}
	// Refuse before any crypto; written to avoid int overflow on huge Pad.
	if len(plaintext) > MaxPlaintext || opts.Pad > MaxPlaintext-len(plaintext) {
		return dst, ErrPayloadTooLarge
	}

	recLen := len(plaintext) + 1 + opts.Pad
	total := HeaderSize + recLen + tagSize
	start := len(dst)
	out := slices.Grow(dst, total)[:start+total]
	body := out[start:]

	// The salt goes straight into the output: no temporary buffer.
	salt := body[:saltSize]
	switch {
	case opts.Salt != nil:
		copy(salt, opts.Salt)
	case opts.Rand != nil:
		if _, err := io.ReadFull(opts.Rand, salt); err != nil {
			return dst, fmt.Errorf("ece: reading salt: %w", err)
		}
	default:
		rand.Read(salt) // never fails: crashes the program instead
	}

	eph := opts.EphemeralKey
	if eph == nil {
		var err error
		if eph, err = ecdh.P256().GenerateKey(rand.Reader); err != nil {
			return dst, fmt.Errorf("ece: generating ephemeral key: %w", err)
		}
	}
	asPub := eph.PublicKey().Bytes()

	binary.BigEndian.PutUint32(body[saltSize:], recordSize)
	body[saltSize+4] = pubKeySize
	copy(body[saltSize+5:HeaderSize], asPub)

	secret, err := eph.ECDH(keys.pub)
	if err != nil {
		// Unreachable for valid keys; kept so a crypto change cannot
		// silently produce garbage.
		return dst, fmt.Errorf("ece: ECDH: %w", err)
	}
	gcm, nonceBuf, err := contentCipher(secret, keys.auth[:], keys.p256[:], asPub, salt)
	if err != nil {
		return dst, err
	}

	// Seal in place: rec holds plaintext, delimiter and padding, and the
	// ciphertext plus tag overwrite it exactly (dst = rec[:0] is allowed).
	rec := body[HeaderSize : HeaderSize+recLen]
	n := copy(rec, plaintext)
	rec[n] = delimiter
	clear(rec[n+1:])
	gcm.Seal(rec[:0], nonceBuf, rec, nil)
	return out, nil
}

// Decrypt opens an aes128gcm body as a user agent does: it reads the
// header, derives the keys from uaPrivate and authSecret, authenticates and
// decrypts the single record and strips its padding. Every failure is
// ErrDecrypt (or ErrBadAuth for an auth secret that is not 16 bytes); the
// error never carries plaintext or key material.
func Decrypt(body []byte, uaPrivate *ecdh.PrivateKey, authSecret []byte) ([]byte, error) {
	if len(authSecret) != authSize {
		return nil, errAuthSize
	}
	if uaPrivate == nil || uaPrivate.Curve() != ecdh.P256() {
		return nil, errUAKey
	}
	if len(body) < saltSize+5 {
		return nil, errShortHeader
	}
	salt := body[:saltSize]
	rs := binary.BigEndian.Uint32(body[saltSize:])
	idlen := int(body[saltSize+4])
	if idlen != pubKeySize {
		return nil, errKeyIDLen
	}
	if len(body) < HeaderSize {
		return nil, errShortHeader
	}
	// RFC 8188: rs must exceed 17 (16-byte tag plus at least the delimiter).
	if rs < tagSize+2 {
		return nil, errRecordSize
	}
	ct := body[HeaderSize:]
	if len(ct) < tagSize+1 {
		return nil, errShortRecord
	}
	// One record only: Web Push never sends more, and a longer body means a
	// sender that thinks otherwise.
	if uint64(len(ct)) > uint64(rs) {
		return nil, errMultiRecord
	}
	asPub := body[saltSize+5 : HeaderSize]
	peer, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, errKeyID
	}
	secret, err := uaPrivate.ECDH(peer)
	if err != nil {
		return nil, errKeyID
	}
	uaPub := uaPrivate.PublicKey().Bytes()
	gcm, nonceBuf, err := contentCipher(secret, authSecret, uaPub, asPub, salt)
	if err != nil {
		return nil, err
	}
	pt, err := gcm.Open(make([]byte, 0, len(ct)-tagSize), nonceBuf, ct, nil)
	if err != nil {
		return nil, errAuth
	}
	// The last non-zero byte must be the final-record delimiter.
	i := len(pt) - 1
	for i >= 0 && pt[i] == 0 {
		i--
	}
	if i < 0 || pt[i] != delimiter {
		clear(pt)
		return nil, errPadding
	}
	return pt[:i], nil
}

// contentCipher derives the content encryption key and nonce from the ECDH secret (RFC 8291
// section 3.4), and returns the AES-GCM cipher of the key, wiped once the cipher holds it, and
// the nonce, in secret's bytes (reuseForNonce). The secret is spent either way: wiped on error.
func contentCipher(secret, auth, uaPub, asPub, salt []byte) (cipher.AEAD, []byte, error) {
	cek, nonce, err := deriveKeys(secret, auth, uaPub, asPub, salt)
	if err != nil {
		clear(secret)
		return nil, nil, err
	}
	gcm, err := newGCM(&cek)
	clear(cek[:])
	if err != nil {
		clear(secret)
		return nil, nil, err
	}
	return gcm, reuseForNonce(secret, &nonce), nil
}

// reuseForNonce wipes the spent ECDH secret and returns its first 12 bytes
// holding the nonce. A nonce passed from the stack to the cipher.AEAD
// interface escapes, costing an allocation per message; the secret is
// already on the heap and no longer needed.
func reuseForNonce(secret []byte, nonce *[nonceSize]byte) []byte {
	clear(secret)
	return append(secret[:0], nonce[:]...)
}

// newGCM returns AES-128-GCM with the standard 12-byte nonce and 16-byte tag.
func newGCM(cek *[keySize]byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(cek[:])
	if err != nil {
		return nil, fmt.Errorf("ece: AES-GCM setup: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("ece: AES-GCM setup: %w", err)
	}
	return gcm, nil
}

// Detailed errors, built once so that error paths (hit hard by fuzzing and
// by hostile input) do not allocate. None of them carries input bytes.
var (
	errNoKeys         = wrap(ErrBadP256dh, "keys not from ParseKeys")
	errNegativePad    = wrap(ErrBadOptions, "negative Pad")
	errSaltSize       = wrap(ErrBadOptions, "Salt must be 16 bytes")
	errEphemeralCurve = wrap(ErrBadOptions, "EphemeralKey is not a P-256 key")

	errAuthSize    = wrap(ErrBadAuth, "auth secret must be 16 bytes")
	errUAKey       = wrap(ErrDecrypt, "private key is not a P-256 key")
	errShortHeader = wrap(ErrDecrypt, "truncated header")
	errKeyIDLen    = wrap(ErrDecrypt, "key id is not a 65-byte P-256 key")
	errRecordSize  = wrap(ErrDecrypt, "record size below 18")
	errShortRecord = wrap(ErrDecrypt, "record shorter than tag and delimiter")
	errMultiRecord = wrap(ErrDecrypt, "more than one record")
	errKeyID       = wrap(ErrDecrypt, "key id is not a valid P-256 point")
	errAuth        = wrap(ErrDecrypt, "authentication failed")
	errPadding     = wrap(ErrDecrypt, "bad padding delimiter")
)

// detailError is a sentinel plus a fixed reason.
type detailError struct {
	sentinel error
	reason   string
}

func wrap(sentinel error, reason string) error { return &detailError{sentinel, reason} }

func (e *detailError) Error() string { return e.sentinel.Error() + ": " + e.reason }
func (e *detailError) Unwrap() error { return e.sentinel }
