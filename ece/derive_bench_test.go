package ece

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The derivation could be written three ways; these benchmarks are why
// hkdf.go uses hand-written HMAC over sha256.Sum256 (see hkdf.go).

// deriveStdHKDF is the derivation with crypto/hkdf.
func deriveStdHKDF(ecdhSecret, auth, uaPub, asPub, salt []byte) (cek [keySize]byte, nonce [nonceSize]byte) {
	info := make([]byte, 0, hmacMaxMsg)
	info = append(append(append(info, keyInfoPrefix...), uaPub...), asPub...)
	ikm, _ := hkdf.Key(sha256.New, ecdhSecret, auth, string(info), 32)
	prk, _ := hkdf.Extract(sha256.New, ikm, salt)
	c, _ := hkdf.Expand(sha256.New, prk, cekInfo[:len(cekInfo)-1], keySize)
	n, _ := hkdf.Expand(sha256.New, prk, nonceInfo[:len(nonceInfo)-1], nonceSize)
	return [keySize]byte(c), [nonceSize]byte(n)
}

// deriveStdHMAC is the derivation with crypto/hmac, one hash per step.
func deriveStdHMAC(ecdhSecret, auth, uaPub, asPub, salt []byte) (cek [keySize]byte, nonce [nonceSize]byte) {
	var sum [sha256.Size]byte
	mac := hmac.New(sha256.New, auth)
	mac.Write(ecdhSecret)
	pk := mac.Sum(sum[:0])
	mac = hmac.New(sha256.New, pk)
	mac.Write([]byte(keyInfoPrefix))
	mac.Write(uaPub)
	mac.Write(asPub)
	mac.Write([]byte{1})
	ikm := mac.Sum(nil)
	mac = hmac.New(sha256.New, salt)
	mac.Write(ikm)
	prk := mac.Sum(nil)
	mac = hmac.New(sha256.New, prk)
	mac.Write([]byte(cekInfo))
	copy(cek[:], mac.Sum(sum[:0]))
	mac.Reset()
	mac.Write([]byte(nonceInfo))
	copy(nonce[:], mac.Sum(sum[:0]))
	return cek, nonce
}

type deriveFunc func(ecdhSecret, auth, uaPub, asPub, salt []byte) ([keySize]byte, [nonceSize]byte)

var derivers = []struct {
	name string
	f    deriveFunc
}{
	{"handHMAC", deriveKeys},
	{"cryptoHMAC", deriveStdHMAC},
	{"cryptoHKDF", deriveStdHKDF},
}

// TestDeriversAgree keeps the benchmark alternatives honest.
func TestDeriversAgree(t *testing.T) {
	v := rfcVector(t)
	for _, d := range derivers {
		t.Run(d.name, func(t *testing.T) {
			cek, nonce := d.f(v["ecdh_secret"], v["auth_secret"], v["ua_public"], v["as_public"], v["salt"])
			if diff := cmp.Diff(v["CEK"], cek[:]); diff != "" {
				t.Errorf("CEK (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(v["NONCE"], nonce[:]); diff != "" {
				t.Errorf("NONCE (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkDerive(b *testing.B) {
	v := rfcVector(b)
	for _, d := range derivers {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d.f(v["ecdh_secret"], v["auth_secret"], v["ua_public"], v["as_public"], v["salt"])
			}
		})
	}
}
