package pushsim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

// admin calls the admin API and decodes a JSON answer into out (nil: ignore the body).
func admin(t *testing.T, s *pushsim.Server, method, path, body string, wantStatus int, out any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.AdminURL()+path, r)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, data, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

func TestAdminRoundTrip(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})

	var sub job.Subscription
	admin(t, s, "POST", "/subscriptions", `{"provider":"wns","application_server_key":"`+app.pub+`"}`, 201, &sub)
	if !strings.HasPrefix(sub.Endpoint, "https://wns2-par02p.notify.windows.com/w/?token=") || sub.Keys.P256dh == "" || sub.Keys.Auth == "" {
		t.Fatalf("subscription = %+v", sub)
	}
	if got := do(t, c, pushRequest(t, app, sub, []byte("via admin"))); got.status != 201 {
		t.Fatalf("push status %d", got.status)
	}

	var ds []pushsim.Delivery
	admin(t, s, "GET", "/deliveries?endpoint="+url.QueryEscape(sub.Endpoint), "", 200, &ds)
	if len(ds) != 1 || string(ds[0].Plaintext) != "via admin" || ds[0].Code != "ACCEPTED" || !ds[0].At.Equal(testNow) {
		t.Fatalf("deliveries = %+v", ds)
	}
	if diff := cmp.Diff(s.DeliveriesFor(sub.Endpoint), ds, cmpDelivery); diff != "" {
		t.Errorf("admin and Go API disagree (-go +admin):\n%s", diff)
	}

	var faults map[string]pushsim.FaultJSON
	admin(t, s, "PUT", "/faults/wns", `{"kind":"throttle","retry_after":5}`, 200, &faults)
	if f := faults["wns"]; f.Kind != pushsim.Throttle || f.RetryAfter != pushsim.JSONDuration(5e9) {
		t.Fatalf("faults = %+v", faults)
	}
	got := do(t, c, pushRequest(t, app, sub, []byte("x")))
	if got.status != 406 || got.header.Get("Retry-After") != "5" {
		t.Fatalf("throttled push = %d Retry-After %q, want 406 and 5", got.status, got.header.Get("Retry-After"))
	}
	admin(t, s, "PUT", "/faults/*", `{"kind":"slow","delay":"1ms"}`, 200, &faults)
	if len(faults) != len(pushsim.Providers()) || faults["fcm"].Delay != pushsim.JSONDuration(1e6) {
		t.Fatalf("faults after * = %+v", faults)
	}
	admin(t, s, "DELETE", "/faults/*", "", 204, nil)
	faults = nil
	admin(t, s, "GET", "/faults", "", 200, &faults)
	if len(faults) != 0 {
		t.Fatalf("faults after DELETE = %+v", faults)
	}

	var since []pushsim.Delivery
	admin(t, s, "GET", "/deliveries?since="+itoa(int(ds[0].Seq)), "", 200, &since)
	if len(since) != 1 || since[0].Fault != "throttle" || since[0].Status != 406 {
		t.Fatalf("deliveries since %d = %+v", ds[0].Seq, since)
	}

	admin(t, s, "POST", "/subscriptions/expire", `{"endpoint":"`+sub.Endpoint+`"}`, 200, nil)
	if got := do(t, c, pushRequest(t, app, sub, []byte("x"))); got.status != 410 {
		t.Fatalf("push after expire = %d, want 410", got.status)
	}

	var st pushsim.Stats
	admin(t, s, "GET", "/stats", "", 200, &st)
	want := map[string]map[string]uint64{"wns": {"ACCEPTED": 1, "RATE_LIMITED": 1, "GONE": 1}}
	if diff := cmp.Diff(want, st.Codes); diff != "" || st.Requests != 3 || st.Subscriptions != 1 {
		t.Fatalf("stats %+v; codes (-want +got):\n%s", st, diff)
	}
	admin(t, s, "POST", "/reset", "", 204, nil)
	st = pushsim.Stats{}
	admin(t, s, "GET", "/stats", "", 200, &st)
	if st.Requests != 0 || len(st.Codes) != 0 || st.Retained != 0 {
		t.Fatalf("stats after reset = %+v", st)
	}

	req, _ := http.NewRequest("GET", s.AdminURL()+"/ca.pem", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	file, err := os.ReadFile(s.CAFile())
	if err != nil || !bytes.Equal(pem, file) || !bytes.Contains(file, []byte("BEGIN CERTIFICATE")) {
		t.Fatalf("GET /ca.pem and CAFile differ or are not a certificate (err %v)", err)
	}
}

// TestAdminRefuses: every refusal of the admin API says what was wrong and lists the values
// it takes, and changes nothing.
func TestAdminRefuses(t *testing.T) {
	s := start(t, pushsim.Config{})
	app := newAppServer(t)
	const providers = "fcm, autopush, apple, wns, generic"
	tests := []struct {
		name, method, path, body string
		want                     int
		says                     string
	}{
		{"unknown provider", "POST", "/subscriptions", `{"provider":"gcm","application_server_key":"` + app.pub + `"}`, 400,
			`unknown provider "gcm" (one of ` + providers + `)`},
		{"host of another provider", "POST", "/subscriptions", `{"provider":"fcm","host":"web.push.apple.com","application_server_key":"` + app.pub + `"}`, 400,
			`"web.push.apple.com" is not a fcm host (fcm.googleapis.com; empty: fcm.googleapis.com)`},
		{"bad key", "POST", "/subscriptions", `{"provider":"fcm","application_server_key":"AAAA"}`, 400, "not a base64url P-256 public key"},
		{"unknown field", "POST", "/subscriptions", `{"provider":"fcm","key":"x"}`, 400,
			`unknown field "key" (the fields: provider, host, application_server_key)`},
		{"expire unknown", "POST", "/subscriptions/expire", `{"endpoint":"https://fcm.googleapis.com/fcm/send/x"}`, 404, "no such subscription"},
		{"unknown fault kind", "PUT", "/faults/fcm", `{"kind":"explode"}`, 400,
			`unknown kind "explode" (one of none, stall, fail, throttle, reset, slow, echo)`},
		{"fault ratio over 1", "PUT", "/faults/fcm", `{"kind":"fail","ratio":2}`, 400, "ratio 2 outside [0, 1]"},
		{"fault status", "PUT", "/faults/fcm", `{"kind":"fail","status":200}`, 400, "status 200 outside 400-599"},
		{"bad delay", "PUT", "/faults/fcm", `{"kind":"slow","delay":"soon"}`, 400, `duration "soon" is not a Go duration (units ns, us, ms, s, m, h`},
		{"slow without delay", "PUT", "/faults/fcm", `{"kind":"slow"}`, 400, "slow needs a delay"},
		{"negative retry_after", "PUT", "/faults/fcm", `{"kind":"throttle","retry_after":-1}`, 400, "retry_after -1s is negative"},
		{"fault for unknown provider", "PUT", "/faults/gcm", `{"kind":"fail"}`, 400, `unknown provider "gcm" (one of ` + providers + `, or "*" for every one)`},
		{"clear for unknown provider", "DELETE", "/faults/gcm", "", 400, `(one of ` + providers + `, or "*" for every one)`},
		{"since not a number", "GET", "/deliveries?since=x", "", 400, `since "x" is not a delivery's seq`},
		{"wrong method", "GET", "/reset", "", 405, "GET /reset: the method is not one of POST"},
		{"unknown endpoint", "GET", "/subscription", "", 404, "no admin endpoint GET /subscription (the endpoints: POST /subscriptions, POST /subscriptions/expire, GET /deliveries, " +
			"GET /faults, PUT /faults/{provider}, DELETE /faults/{provider}, GET /stats, POST /reset, GET /ca.pem)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out struct{ Error string }
			admin(t, s, tc.method, tc.path, tc.body, tc.want, &out)
			if !strings.Contains(out.Error, tc.says) {
				t.Errorf("%s %s: error %q; want it to say %q", tc.method, tc.path, out.Error, tc.says)
			}
		})
	}
	if len(s.Faults()) != 0 || s.Stats().Subscriptions != 0 {
		t.Fatalf("refused calls changed state: faults %v, stats %+v", s.Faults(), s.Stats())
	}
}

func TestDeliveriesBounded(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{MaxDeliveries: 3})
	sub := subscribe(t, s, "generic", "", app)
	for i := range 5 {
		do(t, c, pushRequest(t, app, sub, []byte(itoa(i))))
	}
	var seqs []uint64
	var texts []string
	for _, d := range s.Deliveries() {
		seqs, texts = append(seqs, d.Seq), append(texts, string(d.Plaintext))
	}
	if diff := cmp.Diff([]uint64{3, 4, 5}, seqs); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"2", "3", "4"}, texts); diff != "" {
		t.Errorf("plaintexts (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Retained != 3 || st.Dropped != 2 || st.Requests != 5 {
		t.Errorf("stats = %+v", st)
	}
	if got := s.DeliveriesSince(4, ""); len(got) != 1 || got[0].Seq != 5 {
		t.Errorf("DeliveriesSince(4) = %+v", got)
	}
	if got := s.DeliveriesSince(1, ""); len(got) != 3 {
		t.Errorf("DeliveriesSince(1) = %d deliveries, want the 3 retained", len(got))
	}
	if got := s.DeliveriesSince(9, ""); len(got) != 0 {
		t.Errorf("DeliveriesSince(9) = %d deliveries, want none", len(got))
	}
}

func TestSubscribeRefuses(t *testing.T) {
	s := start(t, pushsim.Config{})
	app := newAppServer(t)
	tests := []struct {
		name, provider, host, key string
		want                      error
	}{
		{"unknown provider", "gcm", "", app.pub, pushsim.ErrProvider},
		{"apple host for fcm", "fcm", "web.push.apple.com", app.pub, pushsim.ErrHost},
		{"generic on a provider host", "generic", "fcm.googleapis.com", app.pub, pushsim.ErrHost},
		{"host with a path", "generic", "push.example.net/x", app.pub, pushsim.ErrHost},
		{"no key (pre-VAPID)", "fcm", "", "", pushsim.ErrKey},
		{"key not on the curve", "fcm", "", "BA" + strings.Repeat("A", 85), pushsim.ErrKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Subscribe(tc.provider, tc.host, tc.key); !errors.Is(err, tc.want) {
				t.Fatalf("Subscribe = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestConnectTo(t *testing.T) {
	s := start(t, pushsim.Config{})
	want := []string{
		"fcm.googleapis.com:443=" + s.Addr(),
		"updates.push.services.mozilla.com:443=" + s.Addr(),
		"web.push.apple.com:443=" + s.Addr(),
		"wns2-par02p.notify.windows.com:443=" + s.Addr(),
	}
	if diff := cmp.Diff(want, s.ConnectTo()); diff != "" {
		t.Fatalf("ConnectTo (-want +got):\n%s", diff)
	}
}

// Close removes the temporary CA directory it created, and only that.
func TestCloseRemovesTempDir(t *testing.T) {
	s, err := pushsim.Start(pushsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.CAFile()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.CAFile()); !os.IsNotExist(err) {
		t.Fatalf("CA file still there after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	dir := t.TempDir()
	s, err = pushsim.Start(pushsim.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(dir + "/ca.pem"); err != nil {
		t.Fatalf("CA file in the caller's Dir removed: %v", err)
	}
}
