package registrytest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

func TestQuickBreakerLoadsUnderDefaults(t *testing.T) {
	reg, err := providers.Parse("r.yaml", []byte("version: 1\ndefaults:\n"+QuickBreaker+"providers:\n  - id: fallback\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := limits.BreakerConfig{FailureRatio: 0.3, Window: 2 * time.Second, MinSamples: 10, Cooldown: time.Second, Probes: 3}
	if got := reg.Fallback().Breaker; got != want {
		t.Fatalf("breaker %+v, want %+v", got, want)
	}
}

func TestEveryProviderListsEachProvider(t *testing.T) {
	reg, err := providers.Parse("r.yaml", []byte("version: 1\n"+EveryProvider))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fcm", "autopush", "apple", "wns", "fallback"}, reg.IDs()); diff != "" {
		t.Fatalf("providers (-want +got):\n%s", diff)
	}
}
