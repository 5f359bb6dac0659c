package chartvalues

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// SchemaDialect is the JSON Schema draft the schema is written in, the one Helm's validator
// (santhosh-tekuri/jsonschema) knows without fetching anything.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// quantityPattern is resource.Quantity's form, as the Kubernetes OpenAPI document gives it.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// special are the types whose JSON form is not their Go structure: they marshal themselves.
var special = map[string]func() map[string]any{
	"k8s.io/apimachinery/pkg/api/resource.Quantity": func() map[string]any {
		return map[string]any{"type": []string{"string", "number"}, "pattern": quantityPattern}
	},
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": func() map[string]any {
		return map[string]any{"type": []string{"string", "integer"}}
	},
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":      func() map[string]any { return map[string]any{"type": "string"} },
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": func() map[string]any { return map[string]any{"type": "string"} },
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":  func() map[string]any { return map[string]any{"type": "string"} },
	thisPackage + ".Scalar": func() map[string]any {
		return map[string]any{"type": []string{"string", "number", "boolean"}}
	},
	thisPackage + ".Port": func() map[string]any {
		return map[string]any{"type": "integer", "minimum": 1, "maximum": 65535}
	},
}

var thisPackage = reflect.TypeFor[Values]().PkgPath()

// Schema is values.schema.json: Values as a JSON Schema in which every object is closed (an
// unknown key is an error) and every map says what its values are. The chart's own types are
// written in place, with their constraints and descriptions; the Kubernetes types they hold are
// written once each under $defs and referred to. A Kubernetes field whose JSON name has no
// omitempty is required, as the API types mark them.
func Schema() ([]byte, error) {
	g := &generator{defs: map[string]any{}}
	root, err := g.schema(reflect.TypeFor[Values]())
	if err != nil {
		return nil, err
	}
	root["$schema"] = SchemaDialect
	root["title"] = "Values of the webpush-gateway chart"
	root["$defs"] = g.defs
	out, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

type generator struct {
	defs map[string]any
}

// defName is the $defs key of a named type outside this package: its import path and name,
// dotted, as the Kubernetes OpenAPI document names its definitions.
func defName(t reflect.Type) string {
	return strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
}

func (g *generator) schema(t reflect.Type) (map[string]any, error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if f, ok := special[t.PkgPath()+"."+t.Name()]; ok {
		return f(), nil
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"}, nil // []byte: base64
		}
		items, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("chartvalues: %s: map keys must be strings", t)
		}
		vals, err := g.schema(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": vals}, nil
	case reflect.Struct:
		if t.PkgPath() == thisPackage || t.Name() == "" {
			return g.object(t)
		}
		name := defName(t)
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // taken: a type that holds itself refers to the name
			obj, err := g.object(t)
			if err != nil {
				return nil, err
			}
			g.defs[name] = obj
		}
		return map[string]any{"$ref": "#/$defs/" + name}, nil
	}
	return nil, fmt.Errorf("chartvalues: %s (%s) has no JSON Schema form here", t, t.Kind())
}

// object is a struct's closed object schema.
func (g *generator) object(t reflect.Type) (map[string]any, error) {
	props := map[string]any{}
	var required []string
	if err := g.fields(t, props, &required); err != nil {
		return nil, err
	}
	obj := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		obj["required"] = required
	}
	return obj, nil
}

// fields adds t's JSON fields to props (those of an inlined struct too) and the required
// ones' names to required.
func (g *generator) fields(t reflect.Type, props map[string]any, required *[]string) error {
	own := t.PkgPath() == thisPackage
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		// encoding/json inlines an embedded struct whose tag gives no name; Kubernetes marks
		// some with ",inline" too.
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if err := g.fields(ft, props, required); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		s, err := g.schema(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		if err := constrain(s, f.Tag); err != nil {
			return fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		props[name] = s
		if (own && f.Tag.Get("required") == "true") || (!own && !strings.Contains(","+opts+",", ",omitempty,")) {
			*required = append(*required, name)
		}
	}
	return nil
}

// constrain adds the constraints of a field's tags to its schema.
func constrain(s map[string]any, tag reflect.StructTag) error {
	if v, ok := tag.Lookup("doc"); ok {
		s["description"] = v
	}
	if v, ok := tag.Lookup("pattern"); ok {
		s["pattern"] = v
	}
	if v, ok := tag.Lookup("propertyNames"); ok {
		s["propertyNames"] = map[string]any{"pattern": v}
	}
	if v, ok := tag.Lookup("enum"); ok {
		s["enum"] = strings.Split(v, ",")
	}
	for _, k := range []string{"minimum", "maximum"} {
		if v, ok := tag.Lookup(k); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			s[k] = n
		}
	}
	if v, ok := tag.Lookup("const"); ok {
		var c any
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			return fmt.Errorf("const: %w", err)
		}
		s["const"] = c
	}
	if v, ok := tag.Lookup("contains"); ok {
		s["contains"] = map[string]any{"const": v}
	}
	if v, ok := tag.Lookup("itemEnum"); ok {
		items, _ := s["items"].(map[string]any)
		if items == nil {
			return fmt.Errorf("itemEnum on a field that is not an array")
		}
		items["enum"] = strings.Split(v, ",")
	}
	return nil
}
