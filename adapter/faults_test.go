package adapter_test

import (
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// fastRegistry is the shipped table with timeouts short enough that a stalled push service
// costs a test a fraction of a second.
const fastRegistry = `
version: 1
defaults:
  rate: 1000
  burst: 100
  max_in_flight: 64
  timeout: 400ms
  connect_timeout: 300ms
  tls_timeout: 300ms
  response_header_timeout: 350ms
  breaker: {failure_ratio: 0.5, window: 30s, min_samples: 20, cooldown: 15s, probes: 3}
providers:
  - id: fcm
    hosts: [fcm.googleapis.com]
    max_ttl: 2419200s
  - id: autopush
    hosts: [push.services.mozilla.com]
    max_ttl: 2592000s
  - id: apple
    hosts: [web.push.apple.com]
    max_ttl: 2592000s
  - id: wns
    hosts: [notify.windows.com]
    max_ttl: 2592000s
  - id: fallback
    kind: generic
    max_ttl: 2419200s
`

func TestFaults(t *testing.T) {
	h := newHarness(t, harnessOptions{registry: []byte(fastRegistry)})
	type want struct {
		code       taxonomy.Code
		status     int
		retryAfter time.Duration
	}
	tests := []struct {
		name     string
		provider string
		fault    pushsim.Fault
		want     want
	}{
		{"fcm stalls", "fcm", pushsim.Fault{Kind: pushsim.Stall}, want{taxonomy.TransportError, 0, 0}},
		{"autopush stalls", "autopush", pushsim.Fault{Kind: pushsim.Stall}, want{taxonomy.TransportError, 0, 0}},
		{"fcm 503", "fcm", pushsim.Fault{Kind: pushsim.Fail, Ratio: 1, Status: 503}, want{taxonomy.ProviderDown, 503, 10 * time.Second}},
		{"autopush 503 asks for 120s", "autopush", pushsim.Fault{Kind: pushsim.Fail, Ratio: 1, Status: 503}, want{taxonomy.ProviderDown, 503, 120 * time.Second}},
		{"apple 500", "apple", pushsim.Fault{Kind: pushsim.Fail, Ratio: 1, Status: 500}, want{taxonomy.ProviderDown, 500, 0}},
		{"wns 500", "wns", pushsim.Fault{Kind: pushsim.Fail, Ratio: 1, Status: 500}, want{taxonomy.ProviderDown, 500, 0}},
		{"generic 502", "generic", pushsim.Fault{Kind: pushsim.Fail, Ratio: 1, Status: 502}, want{taxonomy.ProviderDown, 502, 0}},
		{"fcm throttles", "fcm", pushsim.Fault{Kind: pushsim.Throttle, Ratio: 1, RetryAfter: 7 * time.Second}, want{taxonomy.RateLimited, 429, 7 * time.Second}},
		{"apple throttles", "apple", pushsim.Fault{Kind: pushsim.Throttle, Ratio: 1, RetryAfter: 7 * time.Second}, want{taxonomy.RateLimited, 429, 7 * time.Second}},
		{"wns throttles with 406", "wns", pushsim.Fault{Kind: pushsim.Throttle, Ratio: 1, RetryAfter: 7 * time.Second}, want{taxonomy.RateLimited, 406, 7 * time.Second}},
		{"generic throttles", "generic", pushsim.Fault{Kind: pushsim.Throttle, Ratio: 1, RetryAfter: 7 * time.Second}, want{taxonomy.RateLimited, 429, 7 * time.Second}},
		{"apple resets", "apple", pushsim.Fault{Kind: pushsim.Reset, Ratio: 1}, want{taxonomy.TransportError, 0, 0}},
		{"wns resets", "wns", pushsim.Fault{Kind: pushsim.Reset, Ratio: 1}, want{taxonomy.TransportError, 0, 0}},
		{"slow but in time", "autopush", pushsim.Fault{Kind: pushsim.Slow, Delay: 50 * time.Millisecond}, want{taxonomy.Accepted, 201, 0}},
		{"slower than the timeout", "fcm", pushsim.Fault{Kind: pushsim.Slow, Delay: 2 * time.Second}, want{taxonomy.TransportError, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.sim.SetFault(tc.provider, tc.fault)
			defer h.sim.SetFault(tc.provider, pushsim.Fault{Kind: pushsim.None})
			sub := h.subscribe(t, tc.provider)
			out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60})
			got := want{out.Code, out.Status, out.RetryAfter}
			if got != tc.want {
				t.Fatalf("outcome = %+v (detail %q), want %+v", got, out.Detail, tc.want)
			}
			if out.Retryable != tc.want.code.Retryable() {
				t.Errorf("retryable = %v, want %v", out.Retryable, tc.want.code.Retryable())
			}
			assertNoSecrets(t, "detail", out.Detail, sub)
		})
	}
}
