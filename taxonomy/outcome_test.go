package taxonomy_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

func TestCodes(t *testing.T) {
	want := []struct {
		Code      taxonomy.Code
		Name      string
		Retryable bool
	}{
		{taxonomy.Accepted, "ACCEPTED", false},
		{taxonomy.InvalidRequest, "INVALID_REQUEST", false},
		{taxonomy.Unauthorized, "UNAUTHORIZED", false},
		{taxonomy.KeyMismatch, "KEY_MISMATCH", false},
		{taxonomy.Gone, "GONE", false},
		{taxonomy.PayloadTooLarge, "PAYLOAD_TOO_LARGE", false},
		{taxonomy.RateLimited, "RATE_LIMITED", true},
		{taxonomy.ProviderDown, "PROVIDER_DOWN", true},
		{taxonomy.TransportError, "TRANSPORT_ERROR", true},
		{taxonomy.CircuitOpen, "CIRCUIT_OPEN", true},
		{taxonomy.InvalidTTL, "INVALID_TTL", false},
		{taxonomy.Expired, "EXPIRED", false},
		{taxonomy.InvalidJob, "INVALID_JOB", false},
		{taxonomy.Blocked, "BLOCKED", false},
		{taxonomy.ProxyError, "PROXY_ERROR", true},
		{taxonomy.Canceled, "CANCELED", false},
	}
	codes := taxonomy.Codes()
	if len(codes) != len(want) {
		t.Fatalf("Codes() has %d codes, want %d", len(codes), len(want))
	}
	for i, w := range want {
		c := codes[i]
		got := struct {
			Code      taxonomy.Code
			Name      string
			Retryable bool
		}{c, string(c), c.Retryable()}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("code %d (-want +got):\n%s", i, diff)
		}
		if !c.Valid() {
			t.Errorf("%s.Valid() = false", c)
		}
	}
	codes[0] = "MUTATED"
	if taxonomy.Codes()[0] != taxonomy.Accepted {
		t.Errorf("Codes() shares its backing array with the caller")
	}
	for _, c := range []taxonomy.Code{"", "accepted", "NOPE"} {
		if c.Valid() || c.Retryable() {
			t.Errorf("Code(%q): Valid or Retryable is true", c)
		}
	}
}

func TestOutcomeJSON(t *testing.T) {
	tests := []struct {
		name string
		o    taxonomy.Outcome
		json string
	}{
		{
			name: "retry after in seconds",
			o: taxonomy.Outcome{Code: taxonomy.RateLimited, Status: 429, Provider: "fcm", Retryable: true,
				RetryAfter: 30 * time.Second, Detail: "slow down"},
			json: `{"code":"RATE_LIMITED","status":429,"provider":"fcm","retryable":true,"retry_after":30,"detail":"slow down"}`,
		},
		{
			name: "no retry after is 0",
			o:    taxonomy.Outcome{Code: taxonomy.Gone, Status: 410, Provider: "apple", Detail: "Unregistered"},
			json: `{"code":"GONE","status":410,"provider":"apple","retryable":false,"retry_after":0,"detail":"Unregistered"}`,
		},
		{
			name: "local outcome has status 0",
			o:    taxonomy.Local("wns", taxonomy.TransportError, "dial tcp: i/o timeout"),
			json: `{"code":"TRANSPORT_ERROR","status":0,"provider":"wns","retryable":true,"retry_after":0,"detail":"dial tcp: i/o timeout"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.json, string(b)); diff != "" {
				t.Errorf("Marshal (-want +got):\n%s", diff)
			}
			var back taxonomy.Outcome
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.o, back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutcomeJSONRetryAfterEdges(t *testing.T) {
	// A fraction of a second is written rounded up: a reader waiting that long is never early.
	b, err := json.Marshal(&taxonomy.Outcome{Code: taxonomy.ProviderDown, RetryAfter: 44500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"retry_after":45,`) {
		t.Errorf("Marshal = %s, want retry_after 45", b)
	}

	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{"fraction", `{"retry_after":1.5}`, 1500 * time.Millisecond},
		{"negative reads as none", `{"retry_after":-3}`, 0},
		{"absent", `{}`, 0},
		{"huge saturates", `{"retry_after":1e300}`, time.Duration(1<<63 - 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o taxonomy.Outcome
			if err := json.Unmarshal([]byte(tt.in), &o); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o.RetryAfter); diff != "" {
				t.Errorf("RetryAfter (-want +got):\n%s", diff)
			}
		})
	}

	var o taxonomy.Outcome
	if err := json.Unmarshal([]byte(`{"retry_after":"soon"}`), &o); err == nil {
		t.Errorf("Unmarshal of a string retry_after succeeded")
	}
	if err := json.Unmarshal([]byte(`{"code":"FUTURE_CODE"}`), &o); err != nil || o.Code != "FUTURE_CODE" {
		t.Errorf("unknown code: got %q, %v; want it kept", o.Code, err)
	}
}

func TestLocal(t *testing.T) {
	tests := []struct {
		name   string
		code   taxonomy.Code
		detail string
		want   taxonomy.Outcome
	}{
		{
			name: "blocked is final", code: taxonomy.Blocked, detail: "address 10.0.0.1 is private",
			want: taxonomy.Outcome{Code: taxonomy.Blocked, Provider: "generic", Detail: "address 10.0.0.1 is private"},
		},
		{
			name: "circuit open is retryable", code: taxonomy.CircuitOpen, detail: "breaker open",
			want: taxonomy.Outcome{Code: taxonomy.CircuitOpen, Provider: "generic", Retryable: true, Detail: "breaker open"},
		},
		{
			name: "detail is cleaned like a provider's", code: taxonomy.TransportError,
			detail: "Post \"https://push.example.net/wpush/v2/secret\":\n\tEOF",
			want: taxonomy.Outcome{Code: taxonomy.TransportError, Provider: "generic", Retryable: true,
				Detail: `Post "https://push.example.net/…": EOF`},
		},
		{
			name: "long detail is cut", code: taxonomy.InvalidJob, detail: strings.Repeat("x", 1000),
			want: taxonomy.Outcome{Code: taxonomy.InvalidJob, Provider: "generic", Detail: strings.Repeat("x", 256)},
		},
		{
			name: "an undefined code is kept and not retryable", code: "SOMETHING",
			want: taxonomy.Outcome{Code: "SOMETHING", Provider: "generic"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := taxonomy.Local("generic", tt.code, tt.detail)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
