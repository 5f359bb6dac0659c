package telemetry

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestKeyGauges: every (provider, key) series is at 0 from the start; the source sets the
// paused ones to 1 with their end, and leaves the others at 0.
func TestKeyGauges(t *testing.T) {
	reg, m := newTestMetrics(t)
	count, err := testutil.GatherAndCount(reg, KeyThrottled)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(testProviders) * len(testKeys); count != want {
		t.Errorf("%d %s series before any source, want %d (every provider and key at 0)", count, KeyThrottled, want)
	}
	until := time.Unix(1_800_000_000, 0)
	m.SetKeySource(func() []KeyGauge {
		return []KeyGauge{
			{Provider: testProviders[0], Key: testKeys[0], Throttled: true, ParkedUntil: until},
			{Provider: testProviders[0], Key: testKeys[1]},
		}
	})
	want := `# HELP webpush_key_throttled 1 while the provider has the VAPID key paused in this replica (it answered that key RATE_LIMITED; its jobs on the provider wait), else 0.
# TYPE webpush_key_throttled gauge
webpush_key_throttled{key="` + testKeys[0] + `",provider="` + testProviders[0] + `"} 1
webpush_key_throttled{key="` + testKeys[1] + `",provider="` + testProviders[0] + `"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want+onlyOthers(testProviders[0])), KeyThrottled); err != nil {
		t.Error(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP webpush_key_parked_until_seconds When the provider's pause of the VAPID key ends, in Unix seconds; 0 when it is not paused.
# TYPE webpush_key_parked_until_seconds gauge
webpush_key_parked_until_seconds{key="`+testKeys[0]+`",provider="`+testProviders[0]+`"} 1.8e+09
`+keyZeros(KeyParkedUntilSeconds, testKeys[0], testProviders[0])), KeyParkedUntilSeconds); err != nil {
		t.Error(err)
	}
}

// onlyOthers is the zero series of webpush_key_throttled for every provider but p.
func onlyOthers(p string) string {
	var b strings.Builder
	for _, q := range testProviders {
		if q == p {
			continue
		}
		for _, k := range testKeys {
			b.WriteString(KeyThrottled + `{key="` + k + `",provider="` + q + `"} 0` + "\n")
		}
	}
	return b.String()
}

// keyZeros is the zero series of name for every provider and key but (key, provider).
func keyZeros(name, key, provider string) string {
	var b strings.Builder
	for _, q := range testProviders {
		for _, k := range testKeys {
			if q == provider && k == key {
				continue
			}
			b.WriteString(name + `{key="` + k + `",provider="` + q + `"} 0` + "\n")
		}
	}
	return b.String()
}
