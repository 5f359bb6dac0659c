package adapter_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// messageOf is the push a worker sends for a decoded job: its subscription and body as they are.
func messageOf(j *job.Job) *adapter.Message {
	return &adapter.Message{ID: j.ID, Subscription: j.Subscription, Payload: j.Payload, Ciphertext: j.Ciphertext, TTL: j.TTL}
}

// TestDeclarativeJobReachesSafari: a job's notification arrives at Apple's service encrypted
// and decrypts to exactly the declarative JSON the job renders to, which Safari takes.
func TestDeclarativeJobReachesSafari(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	sub := h.subscribe(t, "apple")
	raw, err := json.Marshal(map[string]any{
		"id": "declarative-1", "subscription": sub, "ttl": 600,
		"notification": map[string]any{
			"title": "Your order <1234> shipped", "body": "On its way & soon there", "navigate": "https://shop.example/orders/1234?from=push",
			"lang": "en-US", "dir": "ltr", "silent": false, "tag": "order-1234", "app_badge": 2, "mutable": true,
			"data": map[string]any{"order": 1234},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	j, err := job.Decode(raw, time.Now())
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	out := h.send(t, messageOf(j))
	want := taxonomy.Outcome{Code: taxonomy.Accepted, Provider: "apple", Status: 201}
	if diff := cmp.Diff(want, out, cmpOutcome); diff != "" {
		t.Fatalf("outcome (-want +got):\n%s", diff)
	}
	ds := h.sim.DeliveriesFor(sub.Endpoint)
	if len(ds) != 1 {
		t.Fatalf("pushsim saw %d deliveries, want 1", len(ds))
	}
	const wantJSON = `{"web_push":8030,"notification":{"title":"Your order <1234> shipped","body":"On its way & soon there",` +
		`"navigate":"https://shop.example/orders/1234?from=push","lang":"en-US","dir":"ltr","silent":false,"tag":"order-1234",` +
		`"data":{"order":1234}},"app_badge":2,"mutable":true}`
	if got := string(ds[0].Plaintext); got != wantJSON {
		t.Errorf("decrypted payload\n got: %s\nwant: %s", got, wantJSON)
	}
	if !ds[0].Declarative {
		t.Error("pushsim did not take the payload as a declarative push message")
	}
}

// TestBrokenDeclarativePayload: a payload an upstream built by hand that claims to be
// declarative but has no navigate is refused at Apple as a malformed push, a final outcome
// that keeps the subscription.
func TestBrokenDeclarativePayload(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	sub := h.subscribe(t, "apple")
	out := h.send(t, &adapter.Message{ID: "broken-1", Subscription: sub, TTL: 600,
		Payload: []byte(`{"web_push":8030,"notification":{"title":"Hi","url":"/orders/1234"}}`)})
	want := taxonomy.Outcome{Code: taxonomy.InvalidRequest, Provider: "apple", Status: 400}
	if diff := cmp.Diff(want, out, cmpOutcome); diff != "" {
		t.Fatalf("outcome (-want +got):\n%s", diff)
	}
	if out.Detail != "BadWebPushRequest" {
		t.Errorf("detail = %q, want BadWebPushRequest", out.Detail)
	}
}

// TestAutopushBridgeAnswers: the two answers of Autopush's FCM bridge, end to end: an app id the
// bridge has no credentials for is INVALID_REQUEST (the subscription is not pruned), and a body
// over the bridge's limit is PAYLOAD_TOO_LARGE.
func TestAutopushBridgeAnswers(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	misconfigured := h.subscribe(t, "autopush")
	if !h.sim.Bridge(misconfigured.Endpoint, "org.mozilla.fenix.unknown") {
		t.Fatal("Bridge did not know the endpoint")
	}
	out := h.send(t, &adapter.Message{ID: "bridge-1", Subscription: misconfigured, TTL: 600, Payload: []byte("hi")})
	want := taxonomy.Outcome{Code: taxonomy.InvalidRequest, Provider: "autopush", Status: 400}
	if diff := cmp.Diff(want, out, cmpOutcome); diff != "" {
		t.Fatalf("invalid app id: outcome (-want +got):\n%s", diff)
	}
	if want := "errno 106: User has invalid app ID org.mozilla.fenix.test"; out.Detail != want {
		t.Errorf("detail = %q, want %q", out.Detail, want)
	}

	bridged := h.subscribe(t, "autopush")
	if !h.sim.Bridge(bridged.Endpoint, pushsim.BridgeAppID) {
		t.Fatal("Bridge did not know the endpoint")
	}
	out = h.send(t, &adapter.Message{ID: "bridge-2", Subscription: bridged, TTL: 600, Payload: make([]byte, 3000)})
	want = taxonomy.Outcome{Code: taxonomy.PayloadTooLarge, Provider: "autopush", Status: 413}
	if diff := cmp.Diff(want, out, cmpOutcome); diff != "" {
		t.Fatalf("bridged 3000 bytes: outcome (-want +got):\n%s", diff)
	}
}
