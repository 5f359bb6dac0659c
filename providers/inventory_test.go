package providers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// TestInventoryForms: each form a line of an export may take, and what it is counted as.
// Reasons are compared whole: they must say what is wrong without quoting the line.
func TestInventoryForms(t *testing.T) {
	reg, err := providers.Load("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type counts = map[string]int
	tests := []struct {
		name   string
		line   string
		byProv counts // provider id -> subscriptions
		byHost counts // unknown authority -> subscriptions
		bad    string // reason the line could not be read; "" when it was
	}{
		{"PushSubscription JSON", `{"endpoint":"https://fcm.googleapis.com/fcm/send/SECRET","expirationTime":null,"keys":{"p256dh":"k","auth":"a"}}`,
			counts{"fcm": 1}, counts{}, ""},
		{"job with a subscription", `{"id":"j","subscription":{"endpoint":"https://web.push.apple.com/SECRET","keys":{}},"payload":"x"}`,
			counts{"apple": 1}, counts{}, ""},
		{"endpoint object", `{"endpoint":"https://updates.push.services.mozilla.com/wpush/v2/SECRET"}`, counts{"autopush": 1}, counts{}, ""},
		{"bare endpoint", "https://wns2-par02p.notify.windows.com/w/?token=SECRET", counts{"wns": 1}, counts{}, ""},
		{"bare endpoint with spaces and CR", "  https://fcm.googleapis.com/fcm/send/SECRET \r", counts{"fcm": 1}, counts{}, ""},
		{"JSON string", `"https://fcm.googleapis.com/fcm/send/SECRET"`, counts{"fcm": 1}, counts{}, ""},
		{"host in upper case with a trailing dot", "https://Web.Push.Apple.COM./SECRET", counts{"apple": 1}, counts{}, ""},
		{"unknown host", "https://push.example.net/wpush/v2/SECRET", counts{"fallback": 1}, counts{"push.example.net": 1}, ""},
		{"unknown host with a port", "https://Push.Example.NET:8443/SECRET", counts{"fallback": 1}, counts{"push.example.net:8443": 1}, ""},
		{"IP literal", "https://[2001:db8::1]/SECRET", counts{"fallback": 1}, counts{"[2001:db8::1]": 1}, ""},
		{"blank line is skipped", "   ", counts{}, counts{}, ""},
		{"http endpoint is invalid", "http://fcm.googleapis.com/fcm/send/SECRET", counts{}, counts{}, "not https (Web Push endpoints are https only)"},
		{"http endpoint in JSON is invalid", `{"endpoint":"http://push.example.net/SECRET"}`, counts{}, counts{}, "not https (Web Push endpoints are https only)"},
		{"broken JSON", `{"endpoint":"https://fcm.googleapis.com/SECRET`, counts{}, counts{}, "not a valid JSON object"},
		{"broken JSON string", `"https://fcm.googleapis.com/SECRET`, counts{}, counts{}, "not a valid JSON string"},
		{"JSON without an endpoint", `{"id":"j","payload":"SECRET"}`, counts{}, counts{},
			`no "endpoint" (want a PushSubscription, a job with "subscription", or {"endpoint": ...})`},
		{"subscription without an endpoint", `{"id":"j","subscription":{"keys":{}}}`, counts{}, counts{}, `"subscription" is not an object with an "endpoint"`},
		{"subscription as a string", `{"id":"j","subscription":"https://fcm.googleapis.com/SECRET"}`, counts{}, counts{}, `"subscription" is not an object with an "endpoint"`},
		{"endpoint not a string", `{"endpoint":["https://fcm.googleapis.com/SECRET"]}`, counts{}, counts{}, "endpoint is not a string"},
		{"subscription endpoint not a string", `{"subscription":{"endpoint":7}}`, counts{}, counts{}, "subscription.endpoint is not a string"},
		{"words", "SECRET words, not a URL", counts{}, counts{}, "bad endpoint: not an absolute URL"},
		{"user information", "https://user:SECRET@push.example.net/x", counts{}, counts{}, "bad endpoint: user information in the URL"},
		{"no host", "https:///SECRET", counts{}, counts{}, "bad endpoint: no host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := providers.NewInventory(reg)
			if err := inv.Read(strings.NewReader(tc.line)); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.byProv, inv.ByProvider); d != "" {
				t.Errorf("per provider (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.byHost, hostCounts(inv)); d != "" {
				t.Errorf("per unknown host (-want +got):\n%s", d)
			}
			var want []providers.LineProblem
			if tc.bad != "" {
				want = []providers.LineProblem{{1, tc.bad}}
			}
			if d := cmp.Diff(want, inv.Problems); d != "" {
				t.Errorf("unreadable lines (-want +got):\n%s", d)
			}
			for _, b := range inv.Problems {
				if strings.Contains(b.Reason, "SECRET") {
					t.Errorf("reason %q quotes the line", b.Reason)
				}
			}
		})
	}
}

// A line longer than the limit is reported, not buffered, and the lines after it are read.
func TestInventoryLongLine(t *testing.T) {
	reg, err := providers.Load("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := "https://fcm.googleapis.com/a\nhttps://fcm.googleapis.com/" + strings.Repeat("x", providers.InventoryMaxLine) + "\nhttps://web.push.apple.com/b"
	inv := providers.NewInventory(reg)
	if err := inv.Read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]int{"fcm": 1, "apple": 1}, inv.ByProvider); d != "" {
		t.Errorf("per provider (-want +got):\n%s", d)
	}
	want := []providers.LineProblem{{2, fmt.Sprintf("longer than %d bytes", providers.InventoryMaxLine)}}
	if d := cmp.Diff(want, inv.Problems); d != "" {
		t.Errorf("unreadable lines (-want +got):\n%s", d)
	}
}

// hostCounts is every unknown host's subscriptions.
func hostCounts(inv *providers.Inventory) map[string]int {
	out := map[string]int{}
	for _, h := range inv.Hosts(1 << 30).Top {
		out[h.Host] = h.Subscriptions
	}
	return out
}
