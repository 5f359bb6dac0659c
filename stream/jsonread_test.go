package stream

import (
	"encoding/json"
	"testing"

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

func checkSplitAgrees(t *testing.T, raw []byte) {
	t.Helper()
	fast, ok := splitValidObject(raw, jobFields, true)
	if !ok {
		return
	}
	slow, err := splitObjectSlow(raw, "", jobFields)
	if err != nil {
		t.Fatalf("%q: fast path took it, slow path says %v", raw, err)
	}
	got, want := map[string]string{}, map[string]string{}
	for k, v := range fast {
		got[k] = string(v)
	}
	for k, v := range slow {
		want[k] = string(v)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%q: members differ (-slow +fast):\n%s", raw, d)
	}
}

// TestJSONStringFastPathAgrees: a string read without encoding/json is what encoding/json
// would have made of it.
func TestJSONStringFastPathAgrees(t *testing.T) {
	for _, raw := range []string{`""`, `"plain"`, `"tab\there"`, `"quote \" in"`, `"caf\u00e9"`, "\"caf\xc3\xa9\"", "\"bad \xff utf8\"", `"ünïcødé ✓"`} {
		checkJSONString(t, []byte(raw))
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u0041"`, "\"\xff\"", `"x\ny"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkJSONString(t, raw) })
}

func checkJSONString(t *testing.T, raw []byte) {
	t.Helper()
	var got, want string
	gotErr, wantErr := jsonString(raw, &got), json.Unmarshal(raw, &want)
	if (gotErr == nil) != (wantErr == nil) || got != want {
		t.Fatalf("%q: jsonString = %q, %v; encoding/json = %q, %v", raw, got, gotErr, want, wantErr)
	}
}
