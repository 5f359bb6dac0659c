package pushsim_test

import (
	"testing"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// TestAppleDeclarative: Apple's service takes a valid declarative push message and marks the
// delivery declarative; a payload meant to be one (a JSON object with web_push) but broken gets
// BadWebPushRequest, which the classifier reads as a final INVALID_REQUEST; any other payload
// is not its business. The other services take all of them.
func TestAppleDeclarative(t *testing.T) {
	s, c, app := setup(t, pushsim.Config{})
	cases := []struct {
		name, payload string
		want          string // "declarative", "plain" (accepted, not declarative) or "refused"
	}{
		{"minimal", `{"web_push":8030,"notification":{"title":"Hi","navigate":"https://shop.example/o"}}`, "declarative"},
		{"every member", `{"web_push":8030,"notification":{"title":"Hi","body":"b","navigate":"https://shop.example/o","lang":"en","dir":"ltr",` +
			`"silent":true,"tag":"t","data":{"k":1}},"app_badge":3,"mutable":true}`, "declarative"},
		{"not JSON", `hello`, "plain"},
		{"JSON without web_push", `{"title":"Hi","url":"/o"}`, "plain"},
		{"a JSON array", `[{"web_push":8030}]`, "plain"},
		{"another magic", `{"web_push":9001,"notification":{"title":"Hi","navigate":"https://shop.example/o"}}`, "refused"},
		{"magic a string", `{"web_push":"8030","notification":{"title":"Hi","navigate":"https://shop.example/o"}}`, "refused"},
		{"cut short", `{"web_push":8030,"notification":{"title":"Hi","navi`, "refused"},
		{"no notification", `{"web_push":8030}`, "refused"},
		{"notification not an object", `{"web_push":8030,"notification":"Hi"}`, "refused"},
		{"no title", `{"web_push":8030,"notification":{"navigate":"https://shop.example/o"}}`, "refused"},
		{"empty title", `{"web_push":8030,"notification":{"title":"","navigate":"https://shop.example/o"}}`, "refused"},
		{"title a number", `{"web_push":8030,"notification":{"title":1,"navigate":"https://shop.example/o"}}`, "refused"},
		{"no navigate", `{"web_push":8030,"notification":{"title":"Hi"}}`, "refused"},
		{"http navigate", `{"web_push":8030,"notification":{"title":"Hi","navigate":"http://shop.example/o"}}`, "refused"},
		{"relative navigate", `{"web_push":8030,"notification":{"title":"Hi","navigate":"/o"}}`, "refused"},
		{"negative app_badge", `{"web_push":8030,"notification":{"title":"Hi","navigate":"https://shop.example/o"},"app_badge":-1}`, "refused"},
		{"mutable a string", `{"web_push":8030,"notification":{"title":"Hi","navigate":"https://shop.example/o"},"mutable":"yes"}`, "refused"},
		{"not UTF-8", "{\"web_push\":8030,\"notification\":{\"title\":\"H\xffi\",\"navigate\":\"https://shop.example/o\"}}", "refused"},
	}
	bad := fixtures.MustGet(pushsim.Apple, "bad-web-push-request")
	for _, provider := range []string{pushsim.Apple, pushsim.FCM, pushsim.Autopush} {
		sub := subscribe(t, s, provider, "", app)
		for _, tc := range cases {
			t.Run(provider+"/"+tc.name, func(t *testing.T) {
				got := do(t, c, pushRequest(t, app, sub, []byte(tc.payload)))
				ds := s.DeliveriesSince(0, "")
				last := ds[len(ds)-1]
				assertClassified(t, provider, got, last)
				want := tc.want
				if provider != pushsim.Apple && want != "plain" {
					want = "plain" // only Safari reads the payload
				}
				switch want {
				case "refused":
					assertFixture(t, bad, got, last)
					if last.Plaintext != nil || last.Declarative {
						t.Errorf("a refused push recorded plaintext %q, declarative %v", last.Plaintext, last.Declarative)
					}
				default:
					if got.status != 201 {
						t.Fatalf("status %d %q, want 201", got.status, got.body)
					}
					if last.Declarative != (want == "declarative") || string(last.Plaintext) != tc.payload {
						t.Errorf("declarative = %v, plaintext %q; want %s", last.Declarative, last.Plaintext, want)
					}
				}
			})
		}
	}
}
