package job

import (
	"net/url"
	"reflect"
	"testing"
)

// TestParsed: a decoded job keeps the parses its checks made, the very ones url.Parse and
// ece.ParseKeys give, and hands each out only for the strings it was made from.
func TestParsed(t *testing.T) {
	raw := `{"id":"a","subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}}`
	j, err := DecodeString(raw, t0)
	if err != nil {
		t.Fatal(err)
	}
	sub := j.Subscription
	want, err := url.Parse(testEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Parsed.URL(sub.Endpoint); !reflect.DeepEqual(got, want) {
		t.Errorf("URL(endpoint) = %#v, want url.Parse's %#v", got, want)
	}
	if j.Parsed.Keys(sub.Keys) == nil {
		t.Error("Keys(keys) = nil, want the decode's parse")
	}

	if got := j.Parsed.URL(testEndpoint + "x"); got != nil {
		t.Errorf("URL(another endpoint) = %v, want nil", got)
	}
	for _, other := range []Keys{{P256dh: testP256dh, Auth: "AAAAAAAAAAAAAAAAAAAAAA"}, {P256dh: "x", Auth: testAuth}, {}} {
		if got := j.Parsed.Keys(other); got != nil {
			t.Errorf("Keys(%+v) = %v, want nil", other, got)
		}
	}
	var zero Parsed
	if zero.URL(sub.Endpoint) != nil || zero.Keys(sub.Keys) != nil {
		t.Error("the zero Parsed handed out a parse")
	}

	_, _, rs, err := DecodeRecipients(`{"add_recipients":{"campaign":"c","recipients":[{"endpoint":"` + testEndpoint +
		`","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}]}}`)
	if err != nil || len(rs) != 1 || rs[0].Invalid != nil {
		t.Fatalf("DecodeRecipients: %v, %+v", err, rs)
	}
	if got := rs[0].Parsed.URL(rs[0].Subscription.Endpoint); !reflect.DeepEqual(got, want) {
		t.Errorf("recipient's URL = %#v, want url.Parse's %#v", got, want)
	}
}
