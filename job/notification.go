package job

import (
	"bytes"
	"encoding/json"
	"net/url"
)

// Declarative Web Push: a push message whose payload is a JSON document the browser reads
// itself and shows as a notification, with no service worker needed (W3C Push API, section
// "Declarative push message"; Safari shows it since 18.4 on iOS and iPadOS, 18.5 on macOS). A job may
// give the notification as fields and let the gateway write that document, instead of
// building it into the payload by hand:
//
//	{"web_push":8030,"notification":{"title":...,"navigate":...},"app_badge":3,"mutable":true}
//
// Browsers that do not know the format hand the same JSON to the service worker's push event,
// so the payload works everywhere a JSON payload does.

// DeclarativeMagic is the value of the document's "web_push" member, which tells a
// declarative push message apart from any other JSON payload.
const DeclarativeMagic = 8030

// notificationFields are the members of a job's "notification", in the order they are read.
// app_badge and mutable are members of the job's notification for the sender's convenience;
// the document carries them at its top level, beside "notification", as the format has them.
var notificationFields = []string{
	"title", "body", "navigate", "lang", "dir", "silent", "tag", "app_badge", "mutable", "data",
}

// maxLangLen bounds a language tag (BCP 47's longest well-formed tags are 35 characters in
// practice; a longer one is a mistake, not a language).
const maxLangLen = 35

// Notification is a job's declarative notification, decoded and checked. The payload it
// renders to (Render) is the job's Payload.
type Notification struct {
	// Title is the notification's title; required, not empty.
	Title string
	// Body is its text, if any.
	Body string
	// Navigate is the absolute https URL the browser opens when the notification is
	// activated; required.
	Navigate string
	// Lang is a language tag ("en-US"); Dir is "auto", "ltr" or "rtl".
	Lang, Dir string
	// Silent, when set, asks for no sound or vibration (true) or for the default (false).
	Silent *bool
	// Tag groups notifications: a newer one with the same tag replaces an older one.
	Tag string
	// AppBadge, when set, is the number the web app's badge shows (0 clears it).
	AppBadge *int64
	// Mutable, when set and true, lets the service worker (if any) change the notification
	// before it is shown.
	Mutable *bool
	// Data is any JSON value handed to the page with the notification, compacted; nil for none.
	Data json.RawMessage
}

// declarativeDoc is the declarative push message as it is written: the members in this order,
// absent ones left out.
type declarativeDoc struct {
	WebPush      int             `json:"web_push"`
	Notification declarativeNote `json:"notification"`
	AppBadge     *int64          `json:"app_badge,omitempty"`
	Mutable      *bool           `json:"mutable,omitempty"`
}

type declarativeNote struct {
	Title    string          `json:"title"`
	Body     string          `json:"body,omitempty"`
	Navigate string          `json:"navigate"`
	Lang     string          `json:"lang,omitempty"`
	Dir      string          `json:"dir,omitempty"`
	Silent   *bool           `json:"silent,omitempty"`
	Tag      string          `json:"tag,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// Render returns the declarative push message for n: compact JSON, HTML characters unescaped
// (they cost six bytes each escaped and mean nothing to a browser here).
func (n *Notification) Render() []byte {
	doc := declarativeDoc{
		WebPush: DeclarativeMagic,
		Notification: declarativeNote{
			Title: n.Title, Body: n.Body, Navigate: n.Navigate, Lang: n.Lang, Dir: n.Dir,
			Silent: n.Silent, Tag: n.Tag, Data: n.Data,
		},
		AppBadge: n.AppBadge,
		Mutable:  n.Mutable,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		// Strings that decoded as UTF-8 and a RawMessage that is valid JSON always encode.
		panic("job: rendering a notification: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// decodeNotification reads a job's "notification" member.
func decodeNotification(m member) (*Notification, error) {
	if kindOf(m.raw) != "an object" {
		return nil, invalid("notification: must be an object, got %s", kindOf(m.raw))
	}
	f, err := splitObject(m.raw, m.at, "notification", notificationFields)
	if err != nil {
		return nil, err
	}
	n := &Notification{}
	for _, s := range []struct {
		name string
		dst  *string
	}{
		{"title", &n.Title}, {"body", &n.Body}, {"navigate", &n.Navigate},
		{"lang", &n.Lang}, {"dir", &n.Dir}, {"tag", &n.Tag},
	} {
		v, ok := f.get(s.name)
		if !ok {
			continue
		}
		if *s.dst, err = stringOf(v, "notification."+s.name); err != nil {
			return nil, err
		}
	}
	if n.Title == "" {
		if _, given := f.get("title"); given {
			return nil, invalid("notification.title: must not be empty")
		}
		return nil, invalid("notification.title: required")
	}
	if _, given := f.get("navigate"); !given {
		return nil, invalid("notification.navigate: required")
	}
	if err := checkNavigate(n.Navigate); err != nil {
		return nil, err
	}
	if _, given := f.get("lang"); given && !validLang(n.Lang) {
		return nil, invalid("notification.lang: must be a language tag (letters, digits and hyphens, 1 to %d characters)", maxLangLen)
	}
	if _, given := f.get("dir"); given && n.Dir != "auto" && n.Dir != "ltr" && n.Dir != "rtl" {
		return nil, invalid("notification.dir: must be one of auto, ltr, rtl")
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"silent", &n.Silent}, {"mutable", &n.Mutable}} {
		v, ok := f.get(b.name)
		if !ok {
			continue
		}
		if *b.dst, err = boolOf(v, "notification."+b.name); err != nil {
			return nil, err
		}
	}
	if v, ok := f.get("app_badge"); ok {
		k, err := wholeNumber(v.raw)
		if err != nil {
			return nil, invalid("notification.app_badge: %v", err)
		}
		if k < 0 {
			return nil, invalid("notification.app_badge: must be at least 0, got %d", k)
		}
		n.AppBadge = &k
	}
	if v, ok := f.get("data"); ok {
		// A member of an object that was split is valid JSON already, but JSON's grammar
		// says nothing of UTF-8: its strings are held to the rule of every string of a job.
		if at := dataNotUTF8(v.raw); at >= 0 {
			return nil, invalid("notification.data: not valid UTF-8 at byte %d", v.at+at)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(v.raw)); err != nil {
			return nil, invalid("notification.data: %s", jsonProblem(err))
		}
		n.Data = buf.Bytes()
	}
	return n, nil
}

// checkNavigate accepts an absolute https URL with a host and no user info. The URL is never
// quoted in a reason: a deep link may carry a token of the site's.
func checkNavigate(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || s == "":
		return invalid("notification.navigate: not a valid URL")
	case !u.IsAbs() || u.Hostname() == "" || u.Opaque != "":
		return invalid("notification.navigate: not an absolute URL with a host")
	case u.Scheme != "https":
		return invalid("notification.navigate: must be an https URL")
	case u.User != nil:
		return invalid("notification.navigate: must not carry user info")
	}
	return nil
}

// dataNotUTF8 is the offset in raw, a valid JSON value, of the first byte of one of its strings
// (member names included) that is not valid UTF-8, or of the escape of a lone surrogate, as
// firstNotUTF8 finds them; -1 when there is none. Outside its strings valid JSON is ASCII, and
// a quote there always opens a string.
func dataNotUTF8(raw string) int {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		end := scanString(raw, i)
		if end < 0 {
			return i // not reached: raw is valid JSON
		}
		if at := firstNotUTF8(raw[i:end]); at >= 0 {
			return i + at
		}
		i = end - 1
	}
	return -1
}

func validLang(s string) bool {
	if s == "" || len(s) > maxLangLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// boolOf reads a member that must be true or false.
func boolOf(m member, field string) (*bool, error) {
	var b bool
	switch m.raw {
	case "true":
		b = true
	case "false":
	default:
		return nil, invalid("%s: must be a boolean, got %s", field, kindOf(m.raw))
	}
	return &b, nil
}
