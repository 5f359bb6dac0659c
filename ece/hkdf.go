package ece

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
)

// Key derivation of RFC 8291 section 3.4 and RFC 8188 section 2.2, each step
// an HKDF-SHA-256 call from crypto/hkdf:
//
//	PRK_key = HKDF-Extract(salt=auth_secret, IKM=ecdh_secret)
//	IKM     = HKDF-Expand(PRK_key, "WebPush: info\0" ua_public as_public, 32)
//	PRK     = HKDF-Extract(salt, IKM)
//	CEK     = HKDF-Expand(PRK, "Content-Encoding: aes128gcm\0", 16)
//	NONCE   = HKDF-Expand(PRK, "Content-Encoding: nonce\0", 12)
//
// The steps are kept apart so the tests can check each intermediate against
// the RFC 8291 vector.

const (
	keyInfoPrefix = "WebPush: info\x00"
	cekInfo       = "Content-Encoding: aes128gcm\x00"
	nonceInfo     = "Content-Encoding: nonce\x00"
)

// prkKey is PRK_key = HKDF-Extract(salt=auth_secret, IKM=ecdh_secret).
func prkKey(auth, ecdhSecret []byte) ([]byte, error) {
	return hkdf.Extract(sha256.New, ecdhSecret, auth)
}

// webPushIKM is IKM = HKDF-Expand(PRK_key, key_info, 32), where key_info is
// "WebPush: info\0" || ua_public || as_public.
func webPushIKM(prkKey, uaPub, asPub []byte) ([]byte, error) {
	info := make([]byte, 0, len(keyInfoPrefix)+len(uaPub)+len(asPub))
	info = append(append(append(info, keyInfoPrefix...), uaPub...), asPub...)
	return hkdf.Expand(sha256.New, prkKey, string(info), 32)
}

// contentPRK is PRK = HKDF-Extract(salt, IKM).
func contentPRK(salt, ikm []byte) ([]byte, error) {
	return hkdf.Extract(sha256.New, ikm, salt)
}

// contentKey is CEK = HKDF-Expand(PRK, cek_info, 16).
func contentKey(prk []byte) (cek [keySize]byte, err error) {
	k, err := hkdf.Expand(sha256.New, prk, cekInfo, keySize)
	if err != nil {
		return cek, err
	}
	copy(cek[:], k)
	clear(k)
	return cek, nil
}

// contentNonce is NONCE = HKDF-Expand(PRK, nonce_info, 12).
func contentNonce(prk []byte) (nonce [nonceSize]byte, err error) {
	n, err := hkdf.Expand(sha256.New, prk, nonceInfo, nonceSize)
	if err != nil {
		return nonce, err
	}
	copy(nonce[:], n)
	return nonce, nil
}

// deriveKeys runs the whole derivation for one message and wipes the
// intermediates. crypto/hkdf refuses only output lengths over 255 hash
// blocks and, in FIPS 140-only mode, keys under 112 bits; neither happens
// with the fixed lengths here, so an error means the runtime's crypto
// policy forbids the derivation.
func deriveKeys(ecdhSecret, auth, uaPub, asPub, salt []byte) (cek [keySize]byte, nonce [nonceSize]byte, err error) {
	pk, err := prkKey(auth, ecdhSecret)
	if err != nil {
		return cek, nonce, derivationError(err)
	}
	defer clear(pk)
	ikm, err := webPushIKM(pk, uaPub, asPub)
	if err != nil {
		return cek, nonce, derivationError(err)
	}
	defer clear(ikm)
	prk, err := contentPRK(salt, ikm)
	if err != nil {
		return cek, nonce, derivationError(err)
	}
	defer clear(prk)
	if cek, err = contentKey(prk); err != nil {
		return cek, nonce, derivationError(err)
	}
	if nonce, err = contentNonce(prk); err != nil {
		clear(cek[:])
		return cek, nonce, derivationError(err)
	}
	return cek, nonce, nil
}

func derivationError(err error) error {
	return fmt.Errorf("ece: key derivation: %w", err)
}
