package dispatch

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/telemetry"
)

// The fallback lane's host gauges count what its per-host limits hold after real sends: a host
// that answered 429 is throttled, one whose sends failed has its own breaker open, and a host
// that only accepted is not tracked; what has passed stops counting without a job for its host.
// A lane without per-host limits has no host gauges.
func TestHostGaugeCountsTheFallbackHosts(t *testing.T) {
	u := newUnitLane(t, "fallback")
	u.sender.answer = func(_ context.Context, m *adapter.Message) taxonomy.Outcome {
		switch ep, _ := url.Parse(m.Subscription.Endpoint); ep.Host {
		case "push.slow.example":
			return taxonomy.Outcome{Code: taxonomy.RateLimited, Status: 429, Provider: "fallback", RetryAfter: time.Minute}
		case "push.down.example":
			return taxonomy.Outcome{Code: taxonomy.ProviderDown, Status: 503, Provider: "fallback"}
		}
		return taxonomy.Outcome{Code: taxonomy.Accepted, Status: 201, Provider: "fallback"}
	}
	if got := u.lim.hostGauge(u.clock.Now()); got == nil || *got != (telemetry.HostGauge{}) {
		t.Fatalf("before any send: host gauge %+v, want all zero", got)
	}
	u.deliver(t, u.entry("slow-1", 0, time.Second, "push.slow.example"), false)
	u.deliver(t, u.entry("down-1", 0, time.Second, "push.down.example"), false)
	u.deliver(t, u.entry("down-2", 0, time.Second, "push.down.example"), false)
	u.deliver(t, u.entry("good-1", 0, time.Second, "push.good.example"), false)
	want := telemetry.HostGauge{Tracked: 2, Open: 1, Throttled: 1}
	if d := cmp.Diff(&want, u.lim.hostGauge(u.clock.Now())); d != "" {
		t.Errorf("host gauge (-want +got):\n%s", d)
	}
	// An hour later, with no job for any of them since: the pause and the cut rate are over and
	// the failures have left the window, so only the broken host's breaker, half-open until a
	// probe answers, is left to count.
	u.clock.Step(time.Hour)
	want = telemetry.HostGauge{Tracked: 1, Open: 1}
	if d := cmp.Diff(&want, u.lim.hostGauge(u.clock.Now())); d != "" {
		t.Errorf("an hour later: host gauge (-want +got):\n%s", d)
	}
	if g := newUnitLane(t, "apple").lim.hostGauge(time.Now()); g != nil {
		t.Errorf("apple's lane, with no per-host limits, has host gauge %+v", g)
	}
}
