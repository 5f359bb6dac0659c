package pushsim_test

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

func TestFailShapes(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	tests := []struct {
		name       string
		provider   string
		fault      pushsim.Fault
		want       string // fixture, or "plain:<status>"
		retryAfter string // Retry-After the client must see
	}{
		{"fcm default 503", "fcm", pushsim.Fault{Kind: pushsim.Fail}, "unavailable", "10"},
		{"autopush 503 is errno 201", "autopush", pushsim.Fault{Kind: pushsim.Fail, Status: 503}, "errno-201", "120"},
		{"autopush 500", "autopush", pushsim.Fault{Kind: pushsim.Fail, Status: 500}, "errno-999", ""},
		{"autopush 502", "autopush", pushsim.Fault{Kind: pushsim.Fail, Status: 502}, "errno-900", ""},
		{"apple 500", "apple", pushsim.Fault{Kind: pushsim.Fail, Status: 500}, "internal-server-error", ""},
		{"apple 503", "apple", pushsim.Fault{Kind: pushsim.Fail, Status: 503}, "service-unavailable", ""},
		{"apple 410 from the fixtures", "apple", pushsim.Fault{Kind: pushsim.Fail, Status: 410}, "gone-other-reason", ""},
		{"wns 500", "wns", pushsim.Fault{Kind: pushsim.Fail, Status: 500}, "internal", ""},
		{"wns 503", "wns", pushsim.Fault{Kind: pushsim.Fail, Status: 503}, "unavailable", "30"},
		{"generic 502", "generic", pushsim.Fault{Kind: pushsim.Fail, Status: 502}, "bad-gateway", ""},
		{"retry-after overrides", "generic", pushsim.Fault{Kind: pushsim.Fail, Status: 500, RetryAfter: 1500 * time.Millisecond}, "internal", "2"},
		{"a status no fixture has", "fcm", pushsim.Fault{Kind: pushsim.Fail, Status: 418}, "plain:418", ""},
		{"fcm throttles 429", "fcm", pushsim.Fault{Kind: pushsim.Throttle}, "throttled", "30"},
		{"autopush throttles with 503 errno 201", "autopush", pushsim.Fault{Kind: pushsim.Throttle}, "errno-201", "120"},
		{"apple throttles, default Retry-After", "apple", pushsim.Fault{Kind: pushsim.Throttle}, "too-many-requests", "30"},
		{"wns throttles with 406", "wns", pushsim.Fault{Kind: pushsim.Throttle}, "throttled", "60"},
		{"generic throttles in seconds", "generic", pushsim.Fault{Kind: pushsim.Throttle}, "throttled-date", "30"},
		{"throttle with a chosen Retry-After", "wns", pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 7 * time.Second}, "throttled", "7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.SetFault(tc.provider, tc.fault); err != nil {
				t.Fatal(err)
			}
			defer s.SetFault(tc.provider, pushsim.Fault{})
			sub := subscribe(t, s, tc.provider, "", app)
			got := do(t, c, pushRequest(t, app, sub, []byte("x")))
			if ra := got.header.Get("Retry-After"); ra != tc.retryAfter {
				t.Errorf("Retry-After = %q, want %q", ra, tc.retryAfter)
			}
			d := s.DeliveriesFor(sub.Endpoint)[0]
			assertClassified(t, tc.provider, got, d)
			if d.Fault != tc.fault.Kind.String() {
				t.Errorf("recorded fault %q, want %q", d.Fault, tc.fault.Kind)
			}
			if tc.want == "plain:418" {
				if got.status != 418 || d.Code != "INVALID_REQUEST" {
					t.Fatalf("status %d code %s, want 418 INVALID_REQUEST", got.status, d.Code)
				}
				return
			}
			f := fixtures.MustGet(tc.provider, tc.want)
			f.Headers = maps.Clone(f.Headers) // the fixture's map is shared with pushsim
			if tc.retryAfter != "" {
				f.Headers["Retry-After"] = tc.retryAfter
			}
			assertFixture(t, f, got, d)
		})
	}
}

// TestEchoQuotesThePath: an Echo answers every provider's push with a body that quotes the
// request's path and query, the subscription's credential, in the status asked for.
func TestEchoQuotesThePath(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	for _, p := range pushsim.Providers() {
		for _, status := range []int{0, 400, 410} {
			t.Run(fmt.Sprintf("%s %d", p, status), func(t *testing.T) {
				if err := s.SetFault(p, pushsim.Fault{Kind: pushsim.Echo, Status: status, RetryAfter: 3 * time.Second}); err != nil {
					t.Fatal(err)
				}
				defer s.SetFault(p, pushsim.Fault{})
				sub := subscribe(t, s, p, "", app)
				u, err := url.Parse(sub.Endpoint)
				if err != nil {
					t.Fatal(err)
				}
				got := do(t, c, pushRequest(t, app, sub, []byte("x")))
				want := status
				if want == 0 {
					want = http.StatusNotFound
				}
				if got.status != want || got.body != "no such subscription "+u.RequestURI()+"\n" || got.header.Get("Retry-After") != "3" {
					t.Fatalf("answer %d %q (Retry-After %q), want %d quoting %q", got.status, got.body, got.header.Get("Retry-After"), want, u.RequestURI())
				}
				d := s.DeliveriesFor(sub.Endpoint)[0]
				if d.Fault != "echo" || d.Answer != "echo" {
					t.Errorf("recorded fault %q answer %q, want echo", d.Fault, d.Answer)
				}
				assertClassified(t, p, got, d)
			})
		}
	}
}

func TestFailRatio(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{Seed: 42})
	if err := s.SetFault("fcm", pushsim.Fault{Kind: pushsim.Fail, Ratio: 0.4}); err != nil {
		t.Fatal(err)
	}
	sub := subscribe(t, s, "fcm", "", app)
	other := subscribe(t, s, "apple", "", app) // a fault on fcm leaves apple alone
	const n = 500
	failed := 0
	for range n {
		switch got := do(t, c, pushRequest(t, app, sub, []byte("x"))); got.status {
		case 503:
			failed++
		case 201:
		default:
			t.Fatalf("status %d", got.status)
		}
		if got := do(t, c, pushRequest(t, app, other, []byte("x"))); got.status != 201 {
			t.Fatalf("apple status %d with a fault on fcm", got.status)
		}
	}
	if ratio := float64(failed) / n; ratio < 0.34 || ratio > 0.46 {
		t.Fatalf("failed %d of %d (%.2f), want 0.40 ± 0.06", failed, n, ratio)
	}
	st := s.Stats()
	want := map[string]uint64{"PROVIDER_DOWN": uint64(failed), "ACCEPTED": uint64(n - failed)}
	if got := st.Codes["fcm"]; len(got) != 2 || got["PROVIDER_DOWN"] != want["PROVIDER_DOWN"] || got["ACCEPTED"] != want["ACCEPTED"] {
		t.Fatalf("stats for fcm = %v, want %v", got, want)
	}
	if st.Codes["apple"]["ACCEPTED"] != n || st.Requests != 2*n {
		t.Fatalf("stats = %+v", st)
	}
}

// TestHostFault: a fault set on one host hits only that host, over its provider's, and clears.
func TestHostFault(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	bad := subscribe(t, s, "generic", "push.bad.example.org", app)
	good := subscribe(t, s, "generic", "push.good.example.org", app)
	if err := s.SetHostFault("Push.Bad.Example.org.", pushsim.Fault{Kind: pushsim.Fail, Status: 503}); err != nil {
		t.Fatal(err)
	}
	if got := do(t, c, pushRequest(t, app, bad, []byte("x"))); got.status != 503 {
		t.Errorf("the faulted host answered %d, want 503", got.status)
	}
	if got := do(t, c, pushRequest(t, app, good, []byte("x"))); got.status != 201 {
		t.Errorf("the other host of the same provider answered %d, want 201", got.status)
	}
	// A host fault wins over its provider's.
	if err := s.SetFault("generic", pushsim.Fault{Kind: pushsim.Fail, Status: 500}); err != nil {
		t.Fatal(err)
	}
	if got := do(t, c, pushRequest(t, app, bad, []byte("x"))); got.status != 503 {
		t.Errorf("with a provider fault too, the faulted host answered %d, want its own 503", got.status)
	}
	if err := s.SetFault("generic", pushsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHostFault("push.bad.example.org", pushsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	if got := do(t, c, pushRequest(t, app, bad, []byte("x"))); got.status != 201 {
		t.Errorf("after clearing, the host answered %d, want 201", got.status)
	}
	if err := s.SetHostFault("push.bad.example.org", pushsim.Fault{Kind: pushsim.Slow}); err == nil {
		t.Error("SetHostFault took a slow fault without a delay")
	}
}

func TestFaultsEveryProvider(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	if err := s.SetFault("*", pushsim.Fault{Kind: pushsim.Fail, Status: 500}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pushsim.Providers() {
		if got := do(t, c, pushRequest(t, app, subscribe(t, s, p, "", app), []byte("x"))); got.status != 500 {
			t.Errorf("%s: status %d, want 500", p, got.status)
		}
	}
	s.Reset()
	if len(s.Faults()) != 0 || len(s.Deliveries()) != 0 || s.Stats().Requests != 0 {
		t.Fatalf("after Reset: faults %v, %d deliveries, stats %+v", s.Faults(), len(s.Deliveries()), s.Stats())
	}
}

func TestSetFaultRefuses(t *testing.T) {
	s := start(t, pushsim.Config{})
	tests := []struct {
		name     string
		provider string
		fault    pushsim.Fault
		want     error
	}{
		{"unknown provider", "gcm", pushsim.Fault{Kind: pushsim.Fail}, pushsim.ErrProvider},
		{"ratio over 1", "fcm", pushsim.Fault{Kind: pushsim.Fail, Ratio: 1.5}, pushsim.ErrFault},
		{"status 200", "fcm", pushsim.Fault{Kind: pushsim.Fail, Status: 200}, pushsim.ErrFault},
		{"slow without delay", "fcm", pushsim.Fault{Kind: pushsim.Slow}, pushsim.ErrFault},
		{"echo with status 200", "fcm", pushsim.Fault{Kind: pushsim.Echo, Status: 200}, pushsim.ErrFault},
		{"unknown kind", "fcm", pushsim.Fault{Kind: 99}, pushsim.ErrFault},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.SetFault(tc.provider, tc.fault); !errors.Is(err, tc.want) {
				t.Fatalf("SetFault = %v, want %v", err, tc.want)
			}
		})
	}
}

// A stalled request holds until the client gives up; then its handler returns and nothing is
// left running once the server closes.
func TestStall(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s, err := pushsim.Start(pushsim.Config{Dir: t.TempDir(), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			c := client(t, s, clientOptions{http1: proto.http1, timeout: 200 * time.Millisecond})
			app := newAppServer(t)
			sub := subscribe(t, s, "apple", "", app)
			if err := s.SetFault("apple", pushsim.Fault{Kind: pushsim.Stall}); err != nil {
				t.Fatal(err)
			}
			defer s.SetFault("apple", pushsim.Fault{})
			_, err := c.Do(pushRequest(t, app, sub, []byte("x")))
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("client error = %v, want a timeout", err)
			}
			waitFor(t, "the stalled handler to return", func() bool {
				return s.Stats().InFlight == 0 && len(s.DeliveriesFor(sub.Endpoint)) == 1
			})
			d := s.DeliveriesFor(sub.Endpoint)[0]
			if d.Status != 0 || d.Code != "TRANSPORT_ERROR" || d.Fault != "stall" {
				t.Fatalf("recorded %d %s fault %q, want 0 TRANSPORT_ERROR stall", d.Status, d.Code, d.Fault)
			}
			c.CloseIdleConnections()
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}

// Close does not wait for a stalled client to give up: it ends the stall.
func TestCloseEndsStall(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	s, err := pushsim.Start(pushsim.Config{Dir: t.TempDir(), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, s, clientOptions{}) // no timeout: only Close can end it
	app := newAppServer(t)
	sub := subscribe(t, s, "fcm", "", app)
	if err := s.SetFault("fcm", pushsim.Fault{Kind: pushsim.Stall}); err != nil {
		t.Fatal(err)
	}
	req := pushRequest(t, app, sub, []byte("x"))
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitFor(t, "the request to stall", func() bool { return s.Stats().InFlight == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("stalled request got an answer after Close")
	}
	if n := s.Stats().InFlight; n != 0 {
		t.Fatalf("in flight after Close: %d", n)
	}
	c.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}

func TestReset(t *testing.T) {
	s := start(t, pushsim.Config{})
	app := newAppServer(t)
	if err := s.SetFault("wns", pushsim.Fault{Kind: pushsim.Reset}); err != nil {
		t.Fatal(err)
	}
	// HTTP/2 resets the stream, HTTP/1.1 the connection.
	for _, proto := range protocols {
		t.Run(proto.name, func(t *testing.T) {
			c := client(t, s, clientOptions{http1: proto.http1})
			sub := subscribe(t, s, "wns", "", app)
			resp, err := c.Do(pushRequest(t, app, sub, []byte("x")))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got status %d, want a transport error", resp.StatusCode)
			}
			d := s.DeliveriesFor(sub.Endpoint)
			if len(d) != 1 || d[0].Status != 0 || d[0].Code != "TRANSPORT_ERROR" || d[0].Fault != "reset" {
				t.Fatalf("recorded %+v", d)
			}
		})
	}
}

func TestSlow(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	sub := subscribe(t, s, "autopush", "", app)
	do(t, c, pushRequest(t, app, subscribe(t, s, "autopush", "", app), []byte("warm up"))) // TLS handshake outside the measurement
	const delay = 50 * time.Millisecond
	if err := s.SetFault("autopush", pushsim.Fault{Kind: pushsim.Slow, Delay: delay}); err != nil {
		t.Fatal(err)
	}
	req := pushRequest(t, app, sub, []byte("x"))
	begin := time.Now()
	got := do(t, c, req)
	if took := time.Since(begin); took < delay {
		t.Fatalf("answered after %v, want at least %v", took, delay)
	}
	if got.status != http.StatusCreated {
		t.Fatalf("status %d, want 201", got.status)
	}
	if d := s.DeliveriesFor(sub.Endpoint); len(d) != 1 || d[0].Fault != "slow" || string(d[0].Plaintext) != "x" {
		t.Fatalf("recorded %+v", d)
	}
}

func TestKeyFault(t *testing.T) {
	s, c, throttled := setup(t, pushsim.Config{})
	other := newAppServer(t)
	subA := subscribe(t, s, "fcm", "", throttled)
	subB := subscribe(t, s, "fcm", "", other)
	// Padding is ignored: the VAPID header carries the key unpadded.
	if err := s.SetKeyFault(throttled.pub+"=", pushsim.Fault{Kind: pushsim.Throttle, RetryAfter: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	got := do(t, c, pushRequest(t, throttled, subA, []byte("x")))
	if got.status != 429 || got.header.Get("Retry-After") != "86400" {
		t.Errorf("the throttled key got %d, Retry-After %q; want 429, 86400", got.status, got.header.Get("Retry-After"))
	}
	if got := do(t, c, pushRequest(t, other, subB, []byte("x"))); got.status != 201 {
		t.Errorf("another key on the same provider got %d, want 201", got.status)
	}
	// A key fault wins over its provider's.
	if err := s.SetFault("fcm", pushsim.Fault{Kind: pushsim.Fail, Status: 500}); err != nil {
		t.Fatal(err)
	}
	if got := do(t, c, pushRequest(t, throttled, subA, []byte("x"))); got.status != 429 {
		t.Errorf("with a provider fault too, the throttled key got %d, want its own 429", got.status)
	}
	if err := s.SetFault("fcm", pushsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetKeyFault(throttled.pub, pushsim.Fault{}); err != nil {
		t.Fatal(err)
	}
	if got := do(t, c, pushRequest(t, throttled, subA, []byte("x"))); got.status != 201 {
		t.Errorf("after clearing, the key got %d, want 201", got.status)
	}
	if err := s.SetKeyFault("", pushsim.Fault{Kind: pushsim.Throttle}); err == nil {
		t.Error("SetKeyFault took an empty key")
	}
}
