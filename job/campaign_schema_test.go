package job

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// schemaObject is the part of a JSON Schema the campaign schema test reads.
type schemaObject struct {
	Ref                  string                   `json:"$ref"`
	Required             []string                 `json:"required"`
	AdditionalProperties *bool                    `json:"additionalProperties"`
	Properties           map[string]*schemaObject `json:"properties"`
	Items                *schemaObject            `json:"items"`
	MaxItems             *int                     `json:"maxItems"`
	OneOf                []*schemaObject          `json:"oneOf"`
}

// TestCampaignSchemaMatchesDecoder: docs/campaign-format.schema.json is JSON Schema 2020-12
// text for the two campaign entries that lists exactly the members DecodeCampaign and
// DecodeRecipients accept, with the same required ones and the batch's bound, and every
// example in it and in the "Campaigns" section of docs/job-format.md decodes, recipients
// included.
func TestCampaignSchemaMatchesDecoder(t *testing.T) {
	raw, err := os.ReadFile("../docs/campaign-format.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		schemaObject
		Schema   string                   `json:"$schema"`
		Defs     map[string]*schemaObject `json:"$defs"`
		Examples []json.RawMessage        `json:"examples"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	if schema.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q", schema.Schema)
	}
	// def follows a reference into $defs; a reference into the job schema is the job's member,
	// which TestSchemaMatchesDecoder checks.
	def := func(o *schemaObject) *schemaObject {
		if name, ok := strings.CutPrefix(o.Ref, "#/$defs/"); ok {
			if d := schema.Defs[name]; d != nil {
				return d
			}
			t.Fatalf("$ref %s names no definition", o.Ref)
		}
		return o
	}
	closed := func(path string, o *schemaObject, members, required []string) {
		t.Helper()
		if o.AdditionalProperties == nil || *o.AdditionalProperties {
			t.Errorf("%s: additionalProperties must be false (the decoder refuses unknown fields)", path)
		}
		names := make([]string, 0, len(o.Properties))
		for k := range o.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		members = append([]string(nil), members...)
		sort.Strings(members)
		if d := cmp.Diff(members, names); d != "" {
			t.Errorf("%s properties (-decoder +schema):\n%s", path, d)
		}
		if d := cmp.Diff(required, o.Required); d != "" {
			t.Errorf("%s required (-decoder +schema):\n%s", path, d)
		}
	}
	if len(schema.OneOf) != 2 {
		t.Fatalf("schema's oneOf has %d entry kinds, want 2", len(schema.OneOf))
	}
	create, add := def(schema.OneOf[0]), def(schema.OneOf[1])
	closed("create entry", create, []string{createMember}, []string{createMember})
	closed("add entry", add, []string{addMember}, []string{addMember})
	closed(createMember, def(create.Properties[createMember]), campaignFields, []string{"id"})
	batch := def(add.Properties[addMember])
	closed(addMember, batch, []string{"batch", "campaign", "recipients"}, []string{"campaign", "recipients"})
	list := batch.Properties["recipients"]
	if list == nil || list.MaxItems == nil || *list.MaxItems != MaxRecipientsPerBatch || list.Items == nil || len(list.Items.OneOf) != 2 {
		t.Fatalf("recipients: want an array of at most %d, each a subscription or a wrapped one: %+v", MaxRecipientsPerBatch, list)
	}
	if ref := list.Items.OneOf[0].Ref; ref != "job-format.schema.json#/properties/subscription" {
		t.Errorf("a bare recipient is %q; want the job's subscription", ref)
	}
	closed("recipient", def(list.Items.OneOf[1]), []string{"recipient", "subscription"}, []string{"subscription"})

	decode := func(what string, entry []byte) (Kind, bool) {
		t.Helper()
		s := string(entry)
		switch k := KindOf(s); k {
		case KindCreateCampaign:
			if _, err := DecodeCampaign(s, t0); err != nil {
				t.Errorf("%s: %v", what, err)
			}
			return k, true
		case KindAddRecipients:
			_, _, rs, err := DecodeRecipients(s)
			if err != nil || len(rs) == 0 {
				t.Errorf("%s: %d recipients, %v", what, len(rs), err)
			}
			for i, r := range rs {
				if r.Invalid != nil {
					t.Errorf("%s: recipient %d: %v", what, i, r.Invalid)
				}
			}
			return k, true
		}
		t.Errorf("%s is not a campaign entry:\n%s", what, entry)
		return KindJob, false
	}
	kinds := map[Kind]int{}
	for i, ex := range schema.Examples {
		k, _ := decode(fmt.Sprintf("schema example %d", i), ex)
		kinds[k]++
	}
	if kinds[KindCreateCampaign] == 0 || kinds[KindAddRecipients] == 0 {
		t.Errorf("schema examples by kind: %v; want both kinds", kinds)
	}
	md, err := os.ReadFile("../docs/job-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(md), "\n## Campaigns\n")
	if !ok {
		t.Fatal(`docs/job-format.md has no "## Campaigns" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	kinds = map[Kind]int{}
	for i, b := range regexp.MustCompile("(?s)```json campaign\n(.*?)```").FindAllStringSubmatch(section, -1) {
		k, _ := decode(fmt.Sprintf("docs example %d", i), []byte(b[1]))
		kinds[k]++
	}
	if kinds[KindCreateCampaign] < 2 || kinds[KindAddRecipients] == 0 {
		t.Errorf("docs examples by kind: %v; want a create with a payload, one with a notification, and a batch", kinds)
	}
}
