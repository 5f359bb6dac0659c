package job

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeNotification: a job's notification becomes the declarative JSON as its payload,
// byte for byte: members in the format's order, absent ones left out, data compacted, HTML
// characters left as they are.
func TestDecodeNotification(t *testing.T) {
	sub := `"subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
	j := func(note string) string { return `{"id":"a",` + sub + `,"notification":` + note + `}` }
	yes, no, zero, thousand := true, false, int64(0), int64(1000)
	cases := []struct {
		name, raw string
		want      Notification
		payload   string
	}{
		{"title and navigate", j(`{"title":"Hi","navigate":"https://shop.example/o"}`),
			Notification{Title: "Hi", Navigate: "https://shop.example/o"},
			`{"web_push":8030,"notification":{"title":"Hi","navigate":"https://shop.example/o"}}`},
		{"every member", j(`{"title":"Ship <now> & \"go\"","body":"b","navigate":"https://shop.example/o?x=1&y=2","lang":"en-US",` +
			`"dir":"ltr","silent":false,"tag":"t1","app_badge":0,"mutable":true,"data":{ "order": 1234, "a": [1, 2] }}`),
			Notification{Title: `Ship <now> & "go"`, Body: "b", Navigate: "https://shop.example/o?x=1&y=2", Lang: "en-US", Dir: "ltr",
				Silent: &no, Tag: "t1", AppBadge: &zero, Mutable: &yes, Data: json.RawMessage(`{"order":1234,"a":[1,2]}`)},
			`{"web_push":8030,"notification":{"title":"Ship <now> & \"go\"","body":"b","navigate":"https://shop.example/o?x=1&y=2",` +
				`"lang":"en-US","dir":"ltr","silent":false,"tag":"t1","data":{"order":1234,"a":[1,2]}},"app_badge":0,"mutable":true}`},
		{"nulls are absent, app_badge 1e3 style", j(`{"title":"Hi","body":null,"navigate":"https://shop.example/","silent":null,"app_badge":1e3,"data":null}`),
			Notification{Title: "Hi", Navigate: "https://shop.example/", AppBadge: &thousand},
			`{"web_push":8030,"notification":{"title":"Hi","navigate":"https://shop.example/"},"app_badge":1000}`},
		{"data a string, unicode title", j(`{"title":"caf\u00e9 😀","navigate":"HTTPS://Shop.Example/a","data":"x"}`),
			Notification{Title: "café 😀", Navigate: "HTTPS://Shop.Example/a", Data: json.RawMessage(`"x"`)},
			`{"web_push":8030,"notification":{"title":"café 😀","navigate":"HTTPS://Shop.Example/a","data":"x"}}`},
		{"escaped member names (the slow path)", j(`{"\u0074itle":"Hi","navigate":"https://shop.example/o"}`),
			Notification{Title: "Hi", Navigate: "https://shop.example/o"},
			`{"web_push":8030,"notification":{"title":"Hi","navigate":"https://shop.example/o"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode([]byte(c.raw), t0)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got.Notification == nil {
				t.Fatal("no notification")
			}
			if d := cmp.Diff(c.want, *got.Notification); d != "" {
				t.Errorf("notification (-want +got):\n%s", d)
			}
			if string(got.Payload) != c.payload {
				t.Errorf("payload\n got: %s\nwant: %s", got.Payload, c.payload)
			}
			if !json.Valid(got.Payload) || got.Ciphertext != nil {
				t.Errorf("payload is not JSON, or a ciphertext came with it")
			}
		})
	}
}

func TestDecodeNotificationInvalid(t *testing.T) {
	sub := `"subscription":{"endpoint":"` + testEndpoint + `","keys":{"p256dh":"` + testP256dh + `","auth":"` + testAuth + `"}}`
	j := func(rest string) string { return `{"id":"a",` + sub + rest + `}` }
	n := func(members string) string { return j(`,"notification":{` + members + `}`) }
	const nav = `"navigate":"https://shop.example/o"`
	ct := base64.StdEncoding.EncodeToString(make([]byte, 21+65+17))
	cases := []struct{ name, raw, reason string }{
		{"not an object", j(`,"notification":"Hi"`), "notification: must be an object, got a string"},
		{"unknown member", n(`"title":"Hi",` + nav + `,"icon":"https://shop.example/i.png"`), `notification: unknown field "icon"`},
		{"duplicate member", n(`"title":"Hi","title":"Ho",` + nav), `notification: duplicate field "title"`},
		{"missing title", n(nav), "notification.title: required"},
		{"null title", n(`"title":null,` + nav), "notification.title: required"},
		{"empty title", n(`"title":"",` + nav), "notification.title: must not be empty"},
		{"title a number", n(`"title":5,` + nav), "notification.title: must be a string, got a number"},
		{"missing navigate", n(`"title":"Hi"`), "notification.navigate: required"},
		{"empty navigate", n(`"title":"Hi","navigate":""`), "notification.navigate: not a valid URL"},
		{"http navigate", n(`"title":"Hi","navigate":"http://shop.example/o"`), "notification.navigate: must be an https URL"},
		{"javascript navigate", n(`"title":"Hi","navigate":"javascript:alert(1)"`), "notification.navigate: not an absolute URL with a host"},
		{"relative navigate", n(`"title":"Hi","navigate":"/orders/1234"`), "notification.navigate: not an absolute URL with a host"},
		{"navigate with a port but no host", n(`"title":"Hi","navigate":"https://:443/o"`), "notification.navigate: not an absolute URL with a host"},
		{"navigate not a URL", n(`"title":"Hi","navigate":"https://shop.example/%zz"`), "notification.navigate: not a valid URL"},
		{"navigate with user info", n(`"title":"Hi","navigate":"https://u:p@shop.example/o"`), "notification.navigate: must not carry user info"},
		{"bad dir", n(`"title":"Hi",` + nav + `,"dir":"up"`), "notification.dir: must be one of auto, ltr, rtl"},
		{"bad lang", n(`"title":"Hi",` + nav + `,"lang":"en US"`), "notification.lang: must be a language tag (letters, digits and hyphens, 1 to 35 characters)"},
		{"silent a string", n(`"title":"Hi",` + nav + `,"silent":"yes"`), "notification.silent: must be a boolean, got a string"},
		{"mutable a number", n(`"title":"Hi",` + nav + `,"mutable":1`), "notification.mutable: must be a boolean, got a number"},
		{"negative app_badge", n(`"title":"Hi",` + nav + `,"app_badge":-1`), "notification.app_badge: must be at least 0, got -1"},
		{"fractional app_badge", n(`"title":"Hi",` + nav + `,"app_badge":1.5`), "notification.app_badge: must be a whole number, got 1.5"},
		{"payload too", j(`,"payload":"x","notification":{"title":"Hi",` + nav + `}`), "payload and notification: give one, not both"},
		{"ciphertext too", j(`,"ciphertext":"` + ct + `","notification":{"title":"Hi",` + nav + `}`), "ciphertext and notification: give one, not both"},
		{"payload_encoding without payload", j(`,"payload_encoding":"text","notification":{"title":"Hi",` + nav + `}`), "payload_encoding: given without payload"},
		// 42 bytes before the title and 39 after it: a 3913-byte title renders to 3994 bytes.
		{"one byte too large after rendering", n(`"title":"` + strings.Repeat("t", 3913) + `",` + nav),
			"notification: renders to 3994 bytes of JSON, 1 over the 3993 a payload may have (one 4096-byte aes128gcm body)"},
		{"escapes count as rendered", n(`"title":"` + strings.Repeat(`\u0001`, 700) + `",` + nav),
			"notification: renders to 4281 bytes of JSON, 288 over the 3993 a payload may have (one 4096-byte aes128gcm body)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode([]byte(c.raw), t0)
			var ije *InvalidError
			if !errors.As(err, &ije) {
				t.Fatalf("Decode = %+v, %v; want INVALID_JOB", got, err)
			}
			if ije.Reason != c.reason {
				t.Errorf("reason\n got: %s\nwant: %s", ije.Reason, c.reason)
			}
			if strings.Contains(ije.Reason, "shop.example") {
				t.Errorf("reason quotes the navigate URL: %s", ije.Reason)
			}
		})
	}
}

// TestDecodeNotificationFitsExactly: a notification that renders to exactly 3993 bytes is
// taken, and its payload is what the limit allows.
func TestDecodeNotificationFitsExactly(t *testing.T) {
	raw := jobWith("a", map[string]any{"payload": nil, "notification": map[string]any{
		"title": strings.Repeat("t", 3912), "navigate": "https://shop.example/o"}})
	got, err := Decode([]byte(raw), t0)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(got.Payload) != MaxPayload {
		t.Fatalf("payload is %d bytes, want %d", len(got.Payload), MaxPayload)
	}
}

// TestDocsDeclarativeExample: docs/job-format.md shows, as the rendered payload, exactly what
// its notification example renders to.
func TestDocsDeclarativeExample(t *testing.T) {
	md, err := os.ReadFile("../docs/job-format.md")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, b := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(md, -1) {
		if !bytes.Contains(b[1], []byte(`"notification"`)) {
			continue
		}
		found = true
		j, err := Decode(b[1], t0)
		if err != nil {
			t.Fatalf("docs example: %v", err)
		}
		if !bytes.Contains(md, []byte("```\n"+string(j.Payload)+"\n```")) {
			t.Errorf("docs/job-format.md does not show the example's payload as it renders:\n%s", j.Payload)
		}
	}
	if !found {
		t.Error("docs/job-format.md has no notification example")
	}
}
