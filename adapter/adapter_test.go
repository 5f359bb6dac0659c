package adapter_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

func TestDeliverToEveryProvider(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { testDeliverToEveryProvider(t, path.viaProxy) })
	}
}

func testDeliverToEveryProvider(t *testing.T, viaProxy bool) {
	h := newHarness(t, harnessOptions{viaProxy: viaProxy})
	tests := []struct {
		provider string // pushsim's name, and the registry id it must route to
		routeTo  string
		host     string
	}{
		{"fcm", "fcm", "fcm.googleapis.com"},
		{"autopush", "autopush", "updates.push.services.mozilla.com"},
		{"apple", "apple", "web.push.apple.com"},
		{"wns", "wns", "wns2-par02p.notify.windows.com"},
		{"generic", "fallback", genericHost},
	}
	for _, tc := range tests {
		t.Run(tc.provider, func(t *testing.T) {
			sub := h.subscribe(t, tc.provider)
			text := "hello " + tc.provider + " ✓"
			start := h.clock.Now()
			out := h.send(t, &adapter.Message{ID: "job-" + tc.provider, Subscription: sub, Payload: []byte(text),
				TTL: 3600, Urgency: "high", Topic: "news"})
			want := taxonomy.Outcome{Code: taxonomy.Accepted, Provider: tc.routeTo, Status: 201}
			if diff := cmp.Diff(want, out, cmpOutcome); diff != "" {
				t.Fatalf("outcome (-want +got):\n%s", diff)
			}
			ds := h.sim.DeliveriesFor(sub.Endpoint)
			if len(ds) != 1 {
				t.Fatalf("pushsim saw %d deliveries, want 1", len(ds))
			}
			d := ds[0]
			if got := string(d.Plaintext); got != text {
				t.Errorf("decrypted plaintext = %q, want %q", got, text)
			}
			if d.Proto != "HTTP/2.0" {
				t.Errorf("protocol = %s, want HTTP/2.0", d.Proto)
			}
			if want := "https://" + tc.host; d.Claims.Aud != want {
				t.Errorf("aud = %q, want %q", d.Claims.Aud, want)
			}
			if d.Claims.Sub != subject {
				t.Errorf("sub = %q, want %q", d.Claims.Sub, subject)
			}
			exp := time.Unix(d.Claims.Exp, 0)
			if lo, hi := start.Add(12*time.Hour-time.Minute), start.Add(12*time.Hour+time.Minute); exp.Before(lo) || exp.After(hi) {
				t.Errorf("exp = %s, want 12h after %s", exp, start)
			}
			wantHeaders := map[string]string{
				"Ttl": "3600", "Content-Encoding": "aes128gcm", "Content-Type": "application/octet-stream",
				"Urgency": "high", "Topic": "news", "X-Job-Id": "job-" + tc.provider,
			}
			for k, v := range wantHeaders {
				if got := d.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if auth := d.Header.Get("Authorization"); !strings.HasPrefix(auth, "vapid t=") || !strings.Contains(auth, ", k="+h.key.PublicKey()) {
				t.Errorf("Authorization = %q, want vapid t=..., k=<our public key>", auth)
			}
		})
	}
	if h.proxy != nil {
		// One tunnel per provider's transport, each to pushsim's address, never a name.
		if n := h.proxy.Connects(); n != int64(len(tests)) || h.proxy.Names() != 0 {
			t.Errorf("proxy saw %d CONNECTs (%d for names), want %d, all for addresses", n, h.proxy.Names(), len(tests))
		}
		for _, target := range h.proxy.Targets() {
			if target != h.sim.Addr() {
				t.Errorf("CONNECT %s, want pushsim's %s", target, h.sim.Addr())
			}
		}
	}
}

// cmpOutcome compares what a test pins: code, provider, status, retryable, Retry-After.
var cmpOutcome = cmp.Comparer(func(a, b taxonomy.Outcome) bool {
	return a.Code == b.Code && a.Provider == b.Provider && a.Status == b.Status &&
		a.Code.Retryable() == b.Retryable && a.RetryAfter == b.RetryAfter
})

func TestShaping(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	tests := []struct {
		name       string
		provider   string
		msg        adapter.Message
		wantCode   taxonomy.Code
		wantHeader map[string]string // checked on the delivery pushsim recorded
	}{
		{"fcm TTL clamped to 4 weeks", "fcm", adapter.Message{TTL: 10_000_000}, taxonomy.Accepted,
			map[string]string{"Ttl": "2419200"}},
		{"autopush TTL clamped to 30 days", "autopush", adapter.Message{TTL: 10_000_000}, taxonomy.Accepted,
			map[string]string{"Ttl": "2592000"}},
		{"TTL 0 kept", "fcm", adapter.Message{TTL: 0}, taxonomy.Accepted, map[string]string{"Ttl": "0"}},
		{"WNS TTL 0 says no-cache", "wns", adapter.Message{TTL: 0}, taxonomy.Accepted,
			map[string]string{"Ttl": "0", "X-Wns-Cache-Policy": "no-cache"}},
		{"WNS with TTL needs no cache policy", "wns", adapter.Message{TTL: 60}, taxonomy.Accepted,
			map[string]string{"X-Wns-Cache-Policy": ""}},
		{"no urgency, no header", "autopush", adapter.Message{TTL: 60}, taxonomy.Accepted, map[string]string{"Urgency": ""}},
		{"Apple takes a 32-character topic", "apple", adapter.Message{TTL: 60, Topic: strings.Repeat("a", 32)}, taxonomy.Accepted, nil},
		{"negative TTL", "fcm", adapter.Message{TTL: -1}, taxonomy.InvalidTTL, nil},
		{"unknown urgency", "fcm", adapter.Message{TTL: 60, Urgency: "urgent"}, taxonomy.InvalidRequest, nil},
		{"topic too long", "autopush", adapter.Message{TTL: 60, Topic: strings.Repeat("a", 33)}, taxonomy.InvalidRequest, nil},
		{"topic outside base64url", "fcm", adapter.Message{TTL: 60, Topic: "a b"}, taxonomy.InvalidRequest, nil},
		{"Apple topic of length 4n+1", "apple", adapter.Message{TTL: 60, Topic: "abcde"}, taxonomy.InvalidRequest, nil},
		{"other providers take length 4n+1", "autopush", adapter.Message{TTL: 60, Topic: "abcde"}, taxonomy.Accepted, nil},
		{"3993 bytes of plaintext fit", "fcm", adapter.Message{TTL: 60, Payload: make([]byte, 3993)}, taxonomy.Accepted, nil},
		{"3994 bytes do not", "fcm", adapter.Message{TTL: 60, Payload: make([]byte, 3994)}, taxonomy.PayloadTooLarge, nil},
		{"ciphertext over 4096", "fcm", adapter.Message{TTL: 60, Ciphertext: make([]byte, 4097)}, taxonomy.PayloadTooLarge, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub := h.subscribe(t, tc.provider)
			m := tc.msg
			m.Subscription = sub
			out := h.send(t, &m)
			if out.Code != tc.wantCode {
				t.Fatalf("code = %s (%s), want %s", out.Code, out.Detail, tc.wantCode)
			}
			ds := h.sim.DeliveriesFor(sub.Endpoint)
			if tc.wantCode != taxonomy.Accepted {
				if out.Status != 0 || len(ds) != 0 {
					t.Fatalf("refused locally, yet status %d and %d requests reached pushsim", out.Status, len(ds))
				}
				assertNoSecrets(t, "detail", out.Detail, sub)
				return
			}
			if len(ds) != 1 {
				t.Fatalf("pushsim saw %d deliveries, want 1", len(ds))
			}
			for k, v := range tc.wantHeader {
				if got := ds[0].Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestBadSubscriptionKeys(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	good := h.subscribe(t, "fcm")
	tests := []struct {
		name         string
		p256dh, auth string
	}{
		{"p256dh not a point", strings.Repeat("A", 87), good.Keys.Auth},
		{"p256dh not base64", "!!!", good.Keys.Auth},
		{"auth 15 bytes", good.Keys.P256dh, "AAAAAAAAAAAAAAAAAAAA"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub := good
			sub.Keys.P256dh, sub.Keys.Auth = tc.p256dh, tc.auth
			out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60})
			if out.Code != taxonomy.InvalidRequest || out.Retryable {
				t.Fatalf("outcome = %+v, want a non-retryable INVALID_REQUEST", out)
			}
			assertNoSecrets(t, "detail", out.Detail, sub)
		})
	}
}

func TestCiphertextSentAsIs(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	sub := h.subscribe(t, "autopush")
	// An upstream that encrypts itself: take a body the adapter made for one send and replay it
	// as ciphertext; pushsim must decrypt the same plaintext.
	first := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("pre-encrypted"), TTL: 60})
	if first.Code != taxonomy.Accepted {
		t.Fatalf("first send: %+v", first)
	}
	body := h.sim.DeliveriesFor(sub.Endpoint)[0].Body
	out := h.send(t, &adapter.Message{Subscription: sub, Ciphertext: body, TTL: 60})
	if out.Code != taxonomy.Accepted {
		t.Fatalf("ciphertext send: %+v", out)
	}
	ds := h.sim.DeliveriesFor(sub.Endpoint)
	if got := string(ds[len(ds)-1].Plaintext); got != "pre-encrypted" {
		t.Fatalf("pushsim decrypted %q, want %q", got, "pre-encrypted")
	}
}

func TestOneSignaturePerAudience(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	providersToUse := []string{"fcm", "autopush", "apple", "wns"}
	const perProvider = 25
	for _, p := range providersToUse {
		sub := h.subscribe(t, p)
		for i := range perProvider {
			if out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte(strconv.Itoa(i)), TTL: 60}); out.Code != taxonomy.Accepted {
				t.Fatalf("%s send %d: %+v", p, i, out)
			}
		}
	}
	if got, want := h.signer.Signatures(), uint64(len(providersToUse)); got != want {
		t.Fatalf("signatures = %d after %d sends to %d audiences, want %d", got, perProvider*len(providersToUse), want, want)
	}
	// Past the lifetime less the refresh margin, the next send signs again, once.
	h.clock.Set(h.clock.Now().Add(12*time.Hour - 14*time.Minute))
	sub := h.subscribe(t, "fcm")
	for range 3 {
		if out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60}); out.Code != taxonomy.Accepted {
			t.Fatalf("send near expiry: %+v", out)
		}
	}
	if got, want := h.signer.Signatures(), uint64(len(providersToUse)+1); got != want {
		t.Fatalf("signatures = %d after refresh, want %d", got, want)
	}
}

func TestKeyAndSubscriptionOutcomes(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "generic"} {
		t.Run(p+"/expired subscription is GONE", func(t *testing.T) {
			sub := h.subscribe(t, p)
			if !h.sim.Expire(sub.Endpoint) {
				t.Fatal("pushsim did not know the endpoint")
			}
			out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60})
			if out.Code != taxonomy.Gone || out.Retryable {
				t.Fatalf("outcome = %+v, want GONE, not retryable", out)
			}
			assertNoSecrets(t, "detail", out.Detail, sub)
		})
		t.Run(p+"/another key", func(t *testing.T) {
			// Each named service says "made with another key" in its own way; a generic RFC 8030
			// service can only refuse the token.
			want := taxonomy.KeyMismatch
			if p == "generic" {
				want = taxonomy.Unauthorized
			}
			sub := h.subscribe(t, p)
			out := h.send(t, &adapter.Message{Subscription: sub, Payload: []byte("x"), TTL: 60, Key: otherKey(t)})
			if out.Code != want || out.Retryable {
				t.Fatalf("outcome = %+v, want %s, not retryable", out, want)
			}
		})
	}
}

func TestExpiredTokenIsUnauthorized(t *testing.T) {
	// A signer whose clock runs two days behind signs tokens that are already expired.
	h := newHarness(t, harnessOptions{now: time.Now().Add(-48 * time.Hour)})
	for _, p := range []string{"fcm", "autopush", "apple"} {
		t.Run(p, func(t *testing.T) {
			out := h.send(t, &adapter.Message{Subscription: h.subscribe(t, p), Payload: []byte("x"), TTL: 60})
			if out.Code != taxonomy.Unauthorized || out.Retryable {
				t.Fatalf("outcome = %+v, want UNAUTHORIZED", out)
			}
		})
	}
}

func ExampleParseConnectTo() {
	m, err := adapter.ParseConnectTo([]string{"FCM.googleapis.com.:443=127.0.0.1:8443"})
	fmt.Println(m, err)
	// Output: map[fcm.googleapis.com:443:127.0.0.1:8443] <nil>
}
