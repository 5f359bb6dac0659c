package simtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// TestStartServesUntilTheTestEnds: the simulator Start returns answers on its admin API while
// the test runs, and is closed by the test's cleanup.
func TestStartServesUntilTheTestEnds(t *testing.T) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var s *pushsim.Server
	t.Run("inner", func(t *testing.T) {
		s = Start(t, pushsim.Config{})
		resp, err := c.Get(s.AdminURL() + "/stats")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /stats: %s", resp.Status)
		}
	})
	if resp, err := c.Get(s.AdminURL() + "/stats"); err == nil {
		resp.Body.Close()
		t.Fatal("the simulator still answers after its test ended")
	}
}

func TestVAPIDKeyIsNamedDefault(t *testing.T) {
	a, b := VAPIDKey(t), VAPIDKey(t)
	if a.Name() != "default" || a.PublicKey() == b.PublicKey() {
		t.Fatalf("keys %q (%s) and %q (%s): want two different keys named default", a.Name(), a.PublicKey(), b.Name(), b.PublicKey())
	}
}

// TestSenderReachesTheSimulator: the Sender delivers to a provider host sim serves and to a
// generic host it was given, and sim opens what it was sent.
func TestSenderReachesTheSimulator(t *testing.T) {
	sim := Start(t, pushsim.Config{})
	reg, err := providers.Parse("registry.yaml", webpushgateway.DefaultRegistry)
	if err != nil {
		t.Fatal(err)
	}
	s := Sender(t, sim, reg, pushsim.GenericHost)
	key := VAPIDKey(t)
	for _, p := range []string{pushsim.FCM, pushsim.Generic} {
		sub, err := sim.Subscribe(p, "", key.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out := s.Send(ctx, &adapter.Message{Subscription: sub, Payload: []byte("hi " + p), TTL: 60, Key: key})
		cancel()
		if out.Code != taxonomy.Accepted {
			t.Fatalf("%s: %+v, want ACCEPTED", p, out)
		}
		if d := sim.DeliveriesFor(sub.Endpoint); len(d) != 1 || string(d[0].Plaintext) != "hi "+p {
			t.Fatalf("%s: sim has %+v, want the one message", p, d)
		}
	}
}
