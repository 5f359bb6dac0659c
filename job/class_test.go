package job

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeClass: a job names its class or gets transactional, so jobs written before classes
// existed keep their place; anything else is refused with the field and the classes named.
func TestDecodeClass(t *testing.T) {
	for _, c := range []struct {
		extra map[string]any
		want  Class
	}{
		{nil, ClassTransactional},
		{map[string]any{"class": nil}, ClassTransactional},
		{map[string]any{"class": "transactional"}, ClassTransactional},
		{map[string]any{"class": "bulk"}, ClassBulk},
	} {
		j, err := DecodeString(jobWith("a", c.extra), t0)
		if err != nil {
			t.Fatalf("%v: %v", c.extra, err)
		}
		if j.Class != c.want {
			t.Errorf("%v: class %q, want %q", c.extra, j.Class, c.want)
		}
	}
	for _, c := range []struct {
		class any
		want  string
	}{
		{"Bulk", `class: must be "transactional" or "bulk", got "Bulk"`},
		{"", `class: must be "transactional" or "bulk", got ""`},
		{strings.Repeat("x", 1000), `class: must be "transactional" or "bulk", got a string of 1000 bytes`},
		{1, `class: must be a string, got a number`},
	} {
		_, err := DecodeString(jobWith("a", map[string]any{"class": c.class}), t0)
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Reason != c.want {
			t.Errorf("class %v: %v, want %q", c.class, err, c.want)
		}
	}
}

// TestClassFromTheIntake: a job that names no class takes its intake's, and one that names
// one keeps it from either intake; PeekIntake tells a producer the intake by the same rule.
func TestClassFromTheIntake(t *testing.T) {
	for _, c := range []struct {
		extra  map[string]any
		intake Class
		want   Class
	}{
		{nil, ClassBulk, ClassBulk},
		{map[string]any{"class": nil}, ClassBulk, ClassBulk},
		{nil, ClassTransactional, ClassTransactional},
		{map[string]any{"class": "transactional"}, ClassBulk, ClassTransactional},
		{map[string]any{"class": "bulk"}, ClassTransactional, ClassBulk},
	} {
		raw := jobWith("a", c.extra)
		j, err := DecodeFromIntake(raw, t0, c.intake)
		if err != nil {
			t.Fatalf("%v from the %s intake: %v", c.extra, c.intake, err)
		}
		if j.Class != c.want {
			t.Errorf("%v from the %s intake: class %q, want %q", c.extra, c.intake, j.Class, c.want)
		}
	}
	for _, c := range []struct {
		raw  string
		want Class
	}{
		{jobWith("a", nil), ClassTransactional},
		{jobWith("a", map[string]any{"class": "bulk"}), ClassBulk},
		{jobWith("a", map[string]any{"class": "transactional"}), ClassTransactional},
		{jobWith("a", map[string]any{"class": "Bulk"}), ClassTransactional},
		{`{"class":"bulk","id":"b"}`, ClassBulk},
	} {
		id, intake, err := PeekIntake([]byte(c.raw))
		if err != nil || id == "" || intake != c.want {
			t.Errorf("PeekIntake(%s) = %q, %q, %v; want the id and %q", c.raw, id, intake, err, c.want)
		}
	}
}
