package ece

import "testing"

// BenchmarkDerive is the key derivation alone, once per message.
func BenchmarkDerive(b *testing.B) {
	v := rfcVector(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := deriveKeys(v["ecdh_secret"], v["auth_secret"], v["ua_public"], v["as_public"], v["salt"]); err != nil {
			b.Fatal(err)
		}
	}
}
