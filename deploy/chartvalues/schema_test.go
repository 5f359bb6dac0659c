package chartvalues_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	strictjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/webpush-gateway/webpush-gateway/deploy/chartvalues"
)

const chartDir = "../helm/webpush-gateway"

// TestSchemaIsCommitted: the chart's values.schema.json is what Schema makes from the types.
func TestSchemaIsCommitted(t *testing.T) {
	want, err := chartvalues.Schema()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("helm/webpush-gateway/values.schema.json is not the types' schema: cd deploy && go run ./chartvalues/cmd/chart-schema")
	}
}

// openObjects lists the places in a schema where an object would take keys nobody declared:
// an object schema with properties but additionalProperties other than false, one without
// properties whose additionalProperties is not a schema of the values (a map), and an array
// without items.
func openObjects(s any, at string) []string {
	var open []string
	switch v := s.(type) {
	case map[string]any:
		typ := fmt.Sprint(v["type"])
		if typ == "object" {
			ap, hasAP := v["additionalProperties"]
			if _, hasProps := v["properties"]; hasProps {
				if ap != false {
					open = append(open, at+": additionalProperties is not false")
				}
			} else if m, isSchema := ap.(map[string]any); !hasAP || !isSchema || len(m) == 0 {
				open = append(open, at+": an object with neither properties nor a schema of its values")
			}
		}
		if typ == "array" {
			if _, ok := v["items"]; !ok {
				open = append(open, at+": an array without items")
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			open = append(open, openObjects(v[k], at+"/"+k)...)
		}
	case []any:
		for i, e := range v {
			open = append(open, openObjects(e, fmt.Sprintf("%s/%d", at, i))...)
		}
	}
	return open
}

// TestSchemaClosesEveryObject: no level of the schema takes an undeclared key, and the check
// finds an open object where there is one.
func TestSchemaClosesEveryObject(t *testing.T) {
	raw, err := chartvalues.Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if open := openObjects(s, "#"); len(open) > 0 {
		t.Errorf("open objects in the schema:\n%s", strings.Join(open, "\n"))
	}
	defs := s["$defs"].(map[string]any)
	if len(defs) < 20 || defs["k8s.io.api.core.v1.Volume"] == nil || defs["k8s.io.api.core.v1.Affinity"] == nil {
		t.Fatalf("the schema's $defs (%d) lack the Kubernetes types the values hold", len(defs))
	}
	// The check itself: one object left open, one map without a value schema, one array
	// without items.
	props := s["properties"].(map[string]any)
	props["image"].(map[string]any)["additionalProperties"] = true
	delete(props["nodeSelector"].(map[string]any), "additionalProperties")
	delete(props["tolerations"].(map[string]any), "items")
	if got := len(openObjects(s, "#")); got != 3 {
		t.Errorf("the check found %d open places in a schema with 3", got)
	}
}

// TestValuesDecodeIntoTheTypes: values.yaml and every example values file decode strictly
// into Values, so the types (and the schema made from them) know every key they use.
func TestValuesDecodeIntoTheTypes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "values-*.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range append([]string{filepath.Join(chartDir, "values.yaml")}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		var v chartvalues.Values
		strict, err := strictjson.UnmarshalStrict(j, &v)
		if err != nil || len(strict) > 0 {
			t.Errorf("%s: %v %v", f, err, strict)
		}
	}
	var v chartvalues.Values
	if strict, _ := strictjson.UnmarshalStrict([]byte(`{"image":{"tga":"v1"}}`), &v); len(strict) == 0 {
		t.Error("a misspelt key decoded without complaint")
	}
}
