package job

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var splitSeeds = []string{
	validJob("a"),
	`{"id":"a","id":"a"}`,
	`{ "id" : "a" , "ttl" : 5 , "payload" : null }`,
	`{"id":"a\"b","subscription":{"keys":{"auth":"x","p256dh":"y"},"endpoint":"https://h/p"},"ttl":1e3}`,
	`{"\u0069d":"a"}`,
	`{"id":"a","extra":[1,{"x":"]}"}]}`,
	`{"payload":"{\"nested\":\"}\"}","topic":"t"}`,
	`[]`, `{}`, `{"id":`, `{"id":"a"} x`, "\t{\n\"id\"\r:\"a\"\n}\n",
	// The grammar the one-pass scan checks in place of json.Valid.
	`{"id":1.}`, `{"id":-}`, `{"id":01}`, `{"id":-0.5e+3}`, `{"id":1e}`, `{"id":1E-0}`, `{"id":.5}`,
	`{"id":"\u12"}`, `{"id":"\u12g4"}`, `{"id":"\x"}`, `{"id":"\\"}`, `{"id":"a\\\"b"}`, "{\"id\":\"a\x01\"}",
	`{"id":tru}`, `{"id":truex}`, `{"id":nul}`, `{"id":[1,]}`, `{"id":[,1]}`, `{"id":{"a":1,}}`, `{"id":{"a"}}`,
	`{"id":{1:2}}`, `{"id":1,}`, `{,"id":1}`, `{"id" 1}`, `{"id":1 "ttl":2}`, `{"id":[1 2]}`, `{"id":"a"}}`,
	`{"id":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"id":` + strings.Repeat(`{"a":`, 40) + `0` + strings.Repeat("}", 40) + `}`,
}

// TestSplitObjectPathsAgree: wherever the fast path answers, the token-by-token path gives the
// same members.
func TestSplitObjectPathsAgree(t *testing.T) {
	for _, s := range splitSeeds {
		checkSplitAgrees(t, []byte(s))
	}
}

func FuzzSplitObject(f *testing.F) {
	for _, s := range splitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkSplitAgrees(t, raw) })
}

func checkSplitAgrees(t *testing.T, b []byte) {
	t.Helper()
	raw := string(b)
	checkScanAgrees(t, raw)
	slow, err := splitObjectSlow(raw, 0, "", jobFields)
	if err == nil {
		checkMembersAreSlices(t, raw, slow)
	}
	fast, ok := splitValidObject(raw, 0, jobFields, true)
	if !ok {
		return
	}
	if err != nil {
		t.Fatalf("%q: fast path took it, slow path says %v", raw, err)
	}
	if !json.Valid(b) {
		t.Fatalf("%q: fast path took it, json.Valid refuses it", raw)
	}
	checkMembersAreSlices(t, raw, fast)
	type seen struct {
		Raw string
		At  int
	}
	got, want := map[string]seen{}, map[string]seen{}
	for k, v := range fast.vals {
		if v.raw != "" {
			got[jobFields[k]] = seen{v.raw, v.at}
		}
	}
	for k, v := range slow.vals {
		if v.raw != "" {
			want[jobFields[k]] = seen{v.raw, v.at}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%q: members differ (-slow +fast):\n%s", raw, d)
	}
}

// checkScanAgrees: scanValue takes a document exactly when json.Valid does, but for one nested
// deeper than maxScanDepth, which it leaves to encoding/json.
func checkScanAgrees(t *testing.T, raw string) {
	t.Helper()
	i := skipSpace(raw, 0)
	end := scanValue(raw, i, 0)
	scanned := end >= 0 && skipSpace(raw, end) == len(raw)
	valid := json.Valid([]byte(raw))
	switch {
	case scanned && !valid:
		t.Fatalf("%q: scanValue takes it, json.Valid refuses it", raw)
	case valid && !scanned && strings.Count(raw, "[")+strings.Count(raw, "{") <= maxScanDepth:
		t.Fatalf("%q: json.Valid takes it, scanValue refuses it (%d)", raw, end)
	}
}

// TestPlainPrefix: the eight-at-a-time look stops at every byte that is not plainByte, wherever
// in a word it is, and at no other.
func TestPlainPrefix(t *testing.T) {
	for c := 0; c < 256; c++ {
		for at := 0; at < 20; at++ {
			b := []byte(strings.Repeat("a\xc3\xa9~ ", 5)[:20])
			b[at] = byte(c)
			want := 20
			if !plainByte[c] {
				want = at
			}
			if got := plainPrefix(string(b)); got != want {
				t.Fatalf("byte %#x at %d: plainPrefix %d, want %d", c, at, got, want)
			}
		}
	}
}

// checkMembersAreSlices: each member's value is the bytes of the entry at its offset, so a
// reason that names an offset names the right byte.
func checkMembersAreSlices(t *testing.T, raw string, ms members) {
	t.Helper()
	for k, m := range ms.vals {
		if m.raw == "" {
			continue
		}
		if m.at < 0 || m.at+len(m.raw) > len(raw) || raw[m.at:m.at+len(m.raw)] != m.raw {
			t.Fatalf("%q: member %q is %q at %d, which is not where the entry holds it", raw, ms.allowed[k], m.raw, m.at)
		}
	}
}

// TestJSONStringFastPathAgrees: a string read without encoding/json is what encoding/json
// would have made of it, and a string encoding/json would have changed (U+FFFD for a byte that
// is not UTF-8, or for half a surrogate pair) is refused instead.
func TestJSONStringFastPathAgrees(t *testing.T) {
	for _, raw := range jsonStringSeeds {
		checkJSONString(t, []byte(raw))
	}
}

var jsonStringSeeds = []string{
	`""`, `"plain"`, `"tab\there"`, `"quote \" in"`, `"caf\u00e9"`, "\"caf\xc3\xa9\"", "\"bad \xff utf8\"", `"ünïcødé ✓"`,
	`"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"\ufffd"`, "\"\xef\xbf\xbd\"",
	"\"\xed\xa0\x80\"", "\"\xc0\xaf\"", "\"a\\n\xc3\"", `"\\ud800"`, `"\UD800"`,
}

func TestJSONStringRefusesInvalidUTF8(t *testing.T) {
	tests := []struct {
		raw string
		at  int // -1: accepted
	}{
		{`"\ud83d\ude00"`, -1},
		{`"\ufffd"`, -1},
		{"\"\xef\xbf\xbd\"", -1},
		{`"\\ud800"`, -1}, // an escaped backslash, then text
		{"\"bad \xff utf8\"", 5},
		{"\"\xc3x\"", 1},              // a sequence cut short
		{"\"\xc0\xaf\"", 1},           // overlong
		{"\"\xed\xa0\x80\"", 1},       // a surrogate encoded as UTF-8
		{"\"a\\n\xc3\"", 4},           // after an escape: the slow path
		{`"ab\ud800"`, 3},             // a lone high half
		{`"\udc00\ud800"`, 1},         // a low half first
		{`"\ud800\u0041"`, 1},         // a high half and no low half
		{`"x\uD83D\uDE00\uDBFF"`, 14}, // a pair, then a lone half
	}
	for _, tc := range tests {
		var got string
		err := jsonString(tc.raw, &got)
		var bad *notUTF8Error
		switch {
		case tc.at < 0 && err != nil:
			t.Errorf("%q: refused (%v)", tc.raw, err)
		case tc.at >= 0 && !errors.As(err, &bad):
			t.Errorf("%q: got %q, %v; want it refused as not UTF-8 at %d", tc.raw, got, err, tc.at)
		case tc.at >= 0 && bad.at != tc.at:
			t.Errorf("%q: not UTF-8 at %d, want %d", tc.raw, bad.at, tc.at)
		}
		checkJSONString(t, []byte(tc.raw))
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range append([]string{`"a"`, `"\u0041"`, "\"\xff\"", `"x\ny"`}, jsonStringSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkJSONString(t, raw) })
}

// checkJSONString: jsonString gives what encoding/json gives, except that it refuses, pointing
// at the first culprit, a string encoding/json would have changed by putting U+FFFD in.
func checkJSONString(t *testing.T, raw []byte) {
	t.Helper()
	var got, want string
	gotErr, wantErr := jsonString(string(raw), &got), json.Unmarshal(raw, &want)
	var bad *notUTF8Error
	if errors.As(gotErr, &bad) {
		if wantErr != nil {
			t.Fatalf("%q: refused as not UTF-8, but encoding/json says %v", raw, wantErr)
		}
		if strings.Count(want, "\uFFFD") <= honestReplacements(raw) {
			t.Fatalf("%q: refused as not UTF-8 at %d, but encoding/json replaced nothing (%q)", raw, bad.at, want)
		}
		if bad.at < 1 || bad.at >= len(raw)-1 || !utf8.Valid(raw[:bad.at]) {
			t.Fatalf("%q: not UTF-8 at %d is not the first bad byte", raw, bad.at)
		}
		spot := raw[bad.at:]
		r, n := utf8.DecodeRune(spot)
		surrogate := len(spot) >= 6 && spot[0] == '\\' && spot[1] == 'u' && utf16.IsSurrogate(hex4(string(spot[2:6])))
		if !(r == utf8.RuneError && n == 1) && !surrogate {
			t.Fatalf("%q: byte %d (%q) is neither a bad byte nor an escaped surrogate", raw, bad.at, spot[:min(6, len(spot))])
		}
		return
	}
	if (gotErr == nil) != (wantErr == nil) || got != want {
		t.Fatalf("%q: jsonString = %q, %v; encoding/json = %q, %v", raw, got, gotErr, want, wantErr)
	}
	if gotErr == nil && strings.Count(got, "\uFFFD") != honestReplacements(raw) {
		t.Fatalf("%q: accepted %q, in which encoding/json put U+FFFD", raw, got)
	}
}

// honestReplacements counts the U+FFFD a JSON string asks for: written out (EF BF BD) or
// escaped (\ufffd in any case).
func honestReplacements(raw []byte) int {
	n := strings.Count(string(raw), "\uFFFD")
	for i := 0; i+1 < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] == 'u' && i+6 <= len(raw) && strings.EqualFold(string(raw[i+2:i+6]), "fffd") {
			n++
		}
		i++ // the escaped character
	}
	return n
}
