package taxonomy_test

import (
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// BenchmarkClassify measures the hot path on answers each worker sees all day: a success, and
// one error of each body shape (FCM text, Autopush JSON, Apple JSON, WNS headers, a long body).
func BenchmarkClassify(b *testing.B) {
	for _, name := range []string{
		"fcm/accepted", "fcm/key-mismatch", "autopush/errno-109-key-mismatch",
		"apple/bad-jwt-token", "wns/throttled", "generic/long-body",
	} {
		provider, fixture, _ := strings.Cut(name, "/")
		f := fixtures.MustGet(provider, fixture)
		h, body := f.Header(), []byte(f.Body)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				taxonomy.ClassifyAt(fixedNow, f.Provider, f.Status, h, body)
			}
		})
	}
}
