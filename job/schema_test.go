package job

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSchemaMatchesDecoder: docs/job-format.schema.json is valid JSON Schema 2020-12 text that
// lists exactly the members Decode accepts, with the same required ones, and every example in
// the schema and in docs/job-format.md decodes.
func TestSchemaMatchesDecoder(t *testing.T) {
	raw, err := os.ReadFile("../docs/job-format.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Type                 any                `json:"type"`
		Required             []string           `json:"required"`
		AdditionalProperties *bool              `json:"additionalProperties"`
		Properties           map[string]*object `json:"properties"`
	}
	var schema struct {
		object
		Schema   string            `json:"$schema"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	if schema.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q", schema.Schema)
	}
	names := func(o *object) []string {
		var out []string
		for k := range o.Properties {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	sorted := func(s []string) []string {
		s = append([]string(nil), s...)
		sort.Strings(s)
		return s
	}
	closed := func(path string, o *object) {
		if o == nil {
			t.Fatalf("schema has no %s", path)
		}
		if o.AdditionalProperties == nil || *o.AdditionalProperties {
			t.Errorf("%s: additionalProperties must be false (the decoder refuses unknown fields)", path)
		}
	}
	closed("job", &schema.object)
	if d := cmp.Diff(sorted(jobFields), names(&schema.object)); d != "" {
		t.Errorf("job properties (-decoder +schema):\n%s", d)
	}
	if d := cmp.Diff([]string{"id", "subscription"}, sorted(schema.Required)); d != "" {
		t.Errorf("job required (-decoder +schema):\n%s", d)
	}
	sub := schema.Properties["subscription"]
	closed("subscription", sub)
	if d := cmp.Diff([]string{"endpoint", "expirationTime", "keys"}, names(sub)); d != "" {
		t.Errorf("subscription properties (-decoder +schema):\n%s", d)
	}
	if d := cmp.Diff([]string{"endpoint", "keys"}, sorted(sub.Required)); d != "" {
		t.Errorf("subscription required (-decoder +schema):\n%s", d)
	}
	keys := sub.Properties["keys"]
	closed("subscription.keys", keys)
	if d := cmp.Diff([]string{"auth", "p256dh"}, names(keys)); d != "" {
		t.Errorf("keys properties (-decoder +schema):\n%s", d)
	}
	if d := cmp.Diff([]string{"auth", "p256dh"}, sorted(keys.Required)); d != "" {
		t.Errorf("keys required (-decoder +schema):\n%s", d)
	}

	note := schema.Properties["notification"]
	closed("notification", note)
	if d := cmp.Diff(sorted(notificationFields), names(note)); d != "" {
		t.Errorf("notification properties (-decoder +schema):\n%s", d)
	}
	if d := cmp.Diff([]string{"navigate", "title"}, sorted(note.Required)); d != "" {
		t.Errorf("notification required (-decoder +schema):\n%s", d)
	}

	if len(schema.Examples) == 0 {
		t.Error("schema has no examples")
	}
	for i, ex := range schema.Examples {
		if _, err := Decode(ex, t0); err != nil {
			t.Errorf("schema example %d: %v", i, err)
		}
	}
	md, err := os.ReadFile("../docs/job-format.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(md, -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/job-format.md has %d json examples, want at least 4", len(blocks))
	}
	for i, b := range blocks {
		j, err := Decode(b[1], t0)
		if err != nil {
			t.Errorf("docs example %d: %v", i, err)
			continue
		}
		if i == 2 && len(j.Ciphertext) == 0 {
			t.Errorf("docs example %d should carry a ciphertext", i)
		}
	}
}
