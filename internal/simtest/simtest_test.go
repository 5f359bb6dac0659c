package simtest

import (
	"net/http"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
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
