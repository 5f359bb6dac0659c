package pushsim_test

import (
	"testing"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// TestSampleChecksOnePushInN: with Sample 4, a bad signature and an undecryptable body are
// refused only on the sampled pushes, every other check still runs on all of them, and the
// counts a load run reads (tokens, bytes) are kept.
func TestSampleChecksOnePushInN(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{Sample: 4, Lean: true})
	sub := subscribe(t, s, pushsim.FCM, "", app)
	other := newAppServer(t)

	before := s.Stats()
	var refused, accepted int
	for range 8 {
		// A body encrypted for another subscription, signed by another key pair than the one
		// the header names: both caught only when the push is sampled.
		wrongBody := encrypt(t, subscribe(t, s, pushsim.FCM, "", app), []byte("x"))
		auth := "vapid t=" + other.jwt(t, claims{Aud: originOf(t, sub.Endpoint), Exp: testNow.Unix() + 3600, Sub: testSubject}) + ", k=" + app.pub
		switch r := do(t, c, rawPush(t, sub.Endpoint, auth, wrongBody)); r.status {
		case 201:
			accepted++
		case 400, 401, 403:
			refused++
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if refused != 2 || accepted != 6 {
		t.Errorf("Sample 4 over 8 bad pushes: %d refused, %d accepted; want 2 and 6", refused, accepted)
	}
	// A wrong audience is caught on every push, sampled or not.
	for range 4 {
		auth := "vapid t=" + app.jwt(t, claims{Aud: "https://wrong.example.com", Exp: testNow.Unix() + 3600, Sub: testSubject}) + ", k=" + app.pub
		if r := do(t, c, rawPush(t, sub.Endpoint, auth, encrypt(t, sub, []byte("x")))); r.status == 201 {
			t.Fatalf("wrong aud accepted on an unsampled push")
		}
	}
	st := s.Stats()
	if got := st.Tokens; got != 12 {
		t.Errorf("Tokens = %d, want 12 (one per signed JWT)", got)
	}
	if st.BytesIn <= before.BytesIn || st.BytesOut <= before.BytesOut {
		t.Errorf("wire bytes did not grow: in %d -> %d, out %d -> %d", before.BytesIn, st.BytesIn, before.BytesOut, st.BytesOut)
	}
	for _, d := range s.Deliveries() {
		if d.Header != nil || d.Body != nil || d.Plaintext != nil {
			t.Fatalf("Lean delivery keeps request data: %+v", d)
		}
	}
}

// TestTokensCountsReusedJWTOnce: a sender that reuses its JWT, as the gateway does, shows as one
// signature however many pushes carry it.
func TestTokensCountsReusedJWTOnce(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	sub := subscribe(t, s, pushsim.Autopush, "", app)
	auth := app.authorization(t, sub.Endpoint)
	for range 5 {
		if r := do(t, c, rawPush(t, sub.Endpoint, auth, encrypt(t, sub, []byte("hi")))); r.status != 201 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if got := s.Stats().Tokens; got != 1 {
		t.Errorf("Tokens = %d after 5 pushes with one JWT, want 1", got)
	}
	s.Reset()
	if got := s.Stats().Tokens; got != 0 {
		t.Errorf("Tokens = %d after Reset, want 0", got)
	}
}
