package adapter_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// decodeJob is the job a lane would decode for sub, payload its text.
func decodeJob(t *testing.T, sub job.Subscription, payload string) *job.Job {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"id": "j", "subscription": sub, "payload": payload})
	if err != nil {
		t.Fatal(err)
	}
	j, err := job.Decode(raw, time.Now())
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return j
}

// TestSendTakesTheJobsParse: a message that carries its job's parse (job.Parsed) is sent as
// one that does not, to the same endpoint with the same payload; a parse of another
// subscription than the message's is not used; and the shared URL is left as it was parsed,
// an empty port included.
func TestSendTakesTheJobsParse(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	sub, other := h.subscribe(t, "fcm"), h.subscribe(t, "fcm")

	j := decodeJob(t, sub, "with the parse")
	if out := h.send(t, &adapter.Message{Subscription: j.Subscription, Parsed: j.Parsed, Payload: j.Payload, TTL: 60}); out.Code != taxonomy.Accepted {
		t.Fatalf("send with the job's parse: %+v", out)
	}
	if ds := h.sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 || string(ds[0].Plaintext) != "with the parse" {
		t.Fatalf("deliveries to the job's endpoint: %+v", ds)
	}

	// The parse of sub travels with other's subscription: other's endpoint and keys are used.
	if out := h.send(t, &adapter.Message{Subscription: other, Parsed: j.Parsed, Payload: []byte("not the parse's"), TTL: 60}); out.Code != taxonomy.Accepted {
		t.Fatalf("send with another subscription's parse: %+v", out)
	}
	if ds := h.sim.DeliveriesFor(other.Endpoint); len(ds) != 1 || string(ds[0].Plaintext) != "not the parse's" {
		t.Fatalf("deliveries to the message's endpoint: %+v", ds)
	}
	if ds := h.sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 {
		t.Fatalf("the parse's endpoint got %d deliveries, want the first alone", len(ds))
	}

	// An empty port is dropped from the request, not from the job's URL.
	colon := sub
	colon.Endpoint = strings.Replace(sub.Endpoint, "fcm.googleapis.com/", "fcm.googleapis.com:/", 1)
	jc := decodeJob(t, colon, "empty port")
	u := jc.Parsed.URL(colon.Endpoint)
	if u == nil || !strings.HasSuffix(u.Host, ":") {
		t.Fatalf("the job's URL of %s is %v", colon.Endpoint, u)
	}
	before := *u
	if out := h.send(t, &adapter.Message{Subscription: jc.Subscription, Parsed: jc.Parsed, Payload: jc.Payload, TTL: 60}); out.Code != taxonomy.Accepted {
		t.Fatalf("send to an empty port: %+v", out)
	}
	if *u != before {
		t.Errorf("the send changed the job's URL: %#v, was %#v", *u, before)
	}
	if ds := h.sim.DeliveriesFor(sub.Endpoint); len(ds) != 2 || string(ds[1].Plaintext) != "empty port" {
		t.Fatalf("deliveries to the endpoint with an empty port: %+v", ds)
	}
}
