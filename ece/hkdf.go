package ece

import "crypto/sha256"

// Key derivation of RFC 8291 section 3.4 and RFC 8188 section 2.2:
//
//	PRK_key = HMAC(auth_secret, ecdh_secret)                       HKDF-Extract
//	IKM     = HMAC(PRK_key, "WebPush: info\0" ua_public as_public 0x01)  Expand, L=32
//	PRK     = HMAC(salt, IKM)                                      HKDF-Extract
//	CEK     = HMAC(PRK, "Content-Encoding: aes128gcm\0" 0x01)[:16] Expand, L=16
//	NONCE   = HMAC(PRK, "Content-Encoding: nonce\0" 0x01)[:12]     Expand, L=12
//
// Every output is at most one SHA-256 block, so each HKDF-Expand is a single
// HMAC over info||0x01. HMAC is written out over sha256.Sum256 with fixed
// stack buffers: crypto/hkdf and crypto/hmac allocate hash states on every
// call, and this runs once per message (see BenchmarkDerive*; the tests
// check the result against crypto/hkdf and the RFC vector).

const (
	hmacBlock = 64 // SHA-256 block size
	// hmacMaxMsg is the longest HMAC message here: key_info||0x01.
	hmacMaxMsg = len(keyInfoPrefix) + 2*pubKeySize + 1
)

const (
	keyInfoPrefix = "WebPush: info\x00"
	cekInfo       = "Content-Encoding: aes128gcm\x00\x01"
	nonceInfo     = "Content-Encoding: nonce\x00\x01"
)

// hmacSHA256 returns HMAC-SHA-256(key, a||b||c||d) (RFC 2104). key is at
// most one block (every key here is 16 or 32 bytes) and the message at
// most hmacMaxMsg bytes; both are fixed by this package, so breaking
// either is a programming error and panics.
func hmacSHA256(key []byte, a, b, c, d []byte) [sha256.Size]byte {
	if len(key) > hmacBlock || len(a)+len(b)+len(c)+len(d) > hmacMaxMsg {
		panic("ece: hmac input too long")
	}
	var buf [hmacBlock + hmacMaxMsg]byte
	for i := range hmacBlock {
		buf[i] = 0x36
	}
	for i, k := range key {
		buf[i] ^= k
	}
	n := hmacBlock
	n += copy(buf[n:], a)
	n += copy(buf[n:], b)
	n += copy(buf[n:], c)
	n += copy(buf[n:], d)
	inner := sha256.Sum256(buf[:n])
	// Turn the ipad block into the opad block: k^0x36^0x36^0x5c.
	for i := range hmacBlock {
		buf[i] ^= 0x36 ^ 0x5c
	}
	copy(buf[hmacBlock:], inner[:])
	out := sha256.Sum256(buf[:hmacBlock+sha256.Size])
	clear(buf[:])
	return out
}

// prkKey is PRK_key = HKDF-Extract(salt=auth_secret, IKM=ecdh_secret).
func prkKey(auth, ecdhSecret []byte) [32]byte {
	return hmacSHA256(auth, ecdhSecret, nil, nil, nil)
}

// webPushIKM is IKM = HKDF-Expand(PRK_key, key_info, 32).
func webPushIKM(prkKey *[32]byte, uaPub, asPub []byte) [32]byte {
	return hmacSHA256(prkKey[:], []byte(keyInfoPrefix), uaPub, asPub, []byte{0x01})
}

// contentPRK is PRK = HKDF-Extract(salt, IKM).
func contentPRK(salt []byte, ikm *[32]byte) [32]byte {
	return hmacSHA256(salt, ikm[:], nil, nil, nil)
}

// contentKey is CEK = HKDF-Expand(PRK, cek_info, 16).
func contentKey(prk *[32]byte) (cek [keySize]byte) {
	t := hmacSHA256(prk[:], []byte(cekInfo), nil, nil, nil)
	copy(cek[:], t[:])
	clear(t[:])
	return cek
}

// contentNonce is NONCE = HKDF-Expand(PRK, nonce_info, 12).
func contentNonce(prk *[32]byte) (nonce [nonceSize]byte) {
	t := hmacSHA256(prk[:], []byte(nonceInfo), nil, nil, nil)
	copy(nonce[:], t[:])
	return nonce
}

// deriveKeys runs the whole derivation for one message.
func deriveKeys(ecdhSecret, auth, uaPub, asPub, salt []byte) (cek [keySize]byte, nonce [nonceSize]byte) {
	pk := prkKey(auth, ecdhSecret)
	ikm := webPushIKM(&pk, uaPub, asPub)
	prk := contentPRK(salt, &ikm)
	cek = contentKey(&prk)
	nonce = contentNonce(&prk)
	clear(pk[:])
	clear(ikm[:])
	clear(prk[:])
	return cek, nonce
}
