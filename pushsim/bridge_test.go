package pushsim_test

import (
	"bytes"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// TestBridge: a subscription Autopush routes through its FCM bridge gets the bridge's two
// answers, and the classifier reads each as the fixture says: an unknown app id is not a dead
// subscription, and the bridge's limit is lower than the 4096 bytes every push service takes.
func TestBridge(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	// 2912 bytes of plaintext make a 3015-byte body, the largest whose base64 fits the bridge.
	fits, over := bytes.Repeat([]byte("a"), 2912), bytes.Repeat([]byte("a"), 2913)

	bridged := subscribe(t, s, pushsim.Autopush, "", app)
	if !s.Bridge(bridged.Endpoint, pushsim.BridgeAppID) {
		t.Fatal("Bridge did not know the endpoint")
	}
	if got := do(t, c, pushRequest(t, app, bridged, fits)); got.status != 201 {
		t.Fatalf("a body that fits the bridge: %d %q", got.status, got.body)
	}
	got := do(t, c, pushRequest(t, app, bridged, over))
	last := s.DeliveriesSince(0, "")
	assertFixture(t, fixtures.MustGet(pushsim.Autopush, "errno-104-bridged"), got, last[len(last)-1])
	assertClassified(t, pushsim.Autopush, got, last[len(last)-1])

	// The same body goes through to a subscription Autopush delivers itself.
	direct := subscribe(t, s, pushsim.Autopush, "", app)
	if got := do(t, c, pushRequest(t, app, direct, over)); got.status != 201 {
		t.Fatalf("a direct subscription refused %d bytes: %d %q", len(over), got.status, got.body)
	}

	misconfigured := subscribe(t, s, pushsim.Autopush, "", app)
	if !s.Bridge(misconfigured.Endpoint, "org.mozilla.fenix.unknown") {
		t.Fatal("Bridge did not know the endpoint")
	}
	for range 2 { // refused each time, never expired: the subscription lives on
		got := do(t, c, pushRequest(t, app, misconfigured, []byte("hi")))
		last := s.DeliveriesSince(0, "")
		assertFixture(t, fixtures.MustGet(pushsim.Autopush, "errno-106-invalid-app-id"), got, last[len(last)-1])
		assertClassified(t, pushsim.Autopush, got, last[len(last)-1])
	}

	other := subscribe(t, s, pushsim.FCM, "", app)
	if s.Bridge(other.Endpoint, pushsim.BridgeAppID) || s.Bridge(bridged.Endpoint+"x", pushsim.BridgeAppID) {
		t.Error("Bridge took an FCM subscription or an unknown endpoint")
	}
}
