package testkit

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

func TestQuickBreakerLoadsUnderDefaults(t *testing.T) {
	reg, err := providers.Parse("r.yaml", []byte("version: 1\ndefaults:\n"+QuickBreaker+"providers:\n  - id: fallback\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := providers.BreakerConfig{FailureRatio: 0.3, Window: 2 * time.Second, MinSamples: 10, Cooldown: time.Second, Probes: 3}
	if got := reg.Fallback().Breaker; got != want {
		t.Fatalf("breaker %+v, want %+v", got, want)
	}
}
