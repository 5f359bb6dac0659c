package pushsim

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"unicode/utf8"

	"github.com/webpush-gateway/webpush-gateway/test/fixtures"
)

// Safari shows a push whose payload is a declarative push message (W3C Push API) itself,
// without a service worker. Apple's service cannot read a payload, which is encrypted to the
// browser; Safari can, and one that is meant to be declarative but is broken shows nothing
// where there is no service worker, and a site whose pushes show nothing loses its
// subscriptions. pushsim plays the browser as well as the service, so its Apple service reads
// every payload it decrypts and refuses a broken declarative one with Apple's answer to a
// malformed push, 400 BadWebPushRequest: the sender's tests see what Safari would drop
// without a word.

// badDeclarative is Apple's answer to a broken declarative payload.
var badDeclarative = fromFixture(fixtures.MustGet(Apple, "bad-web-push-request"))

// checkDeclarative reads a decrypted payload. meant is whether it is meant to be a declarative
// push message: a JSON object with a "web_push" member (what else would carry one). ok is
// whether it is a valid one: UTF-8 JSON, web_push 8030, a notification object with a title
// that is a non-empty string and a navigate that is an absolute https URL, and app_badge and
// mutable, when present, a whole number from 0 and a boolean.
func checkDeclarative(plaintext []byte) (meant, ok bool) {
	if t := bytes.TrimLeft(plaintext, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return false, false
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(plaintext, &doc); err != nil {
		return bytes.Contains(plaintext, []byte(`"web_push"`)), false
	}
	magic, meant := doc["web_push"]
	if !meant {
		return false, false
	}
	if !utf8.Valid(plaintext) || string(magic) != "8030" { // the format's magic number
		return true, false
	}
	var note struct {
		Title    *string `json:"title"`
		Navigate *string `json:"navigate"`
	}
	if raw, has := doc["notification"]; !has || raw[0] != '{' || json.Unmarshal(raw, &note) != nil {
		return true, false
	}
	if note.Title == nil || *note.Title == "" || note.Navigate == nil {
		return true, false
	}
	if u, err := url.Parse(*note.Navigate); err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return true, false
	}
	if raw, has := doc["app_badge"]; has {
		var n float64
		if json.Unmarshal(raw, &n) != nil || n < 0 || n != math.Trunc(n) {
			return true, false
		}
	}
	if raw, has := doc["mutable"]; has && string(raw) != "true" && string(raw) != "false" {
		return true, false
	}
	return true, true
}
