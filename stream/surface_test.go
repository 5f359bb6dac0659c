package stream

import (
	"reflect"
	"strings"
	"testing"
)

// maxStoreMethods bounds what *Store exports. Each method is one more thing dispatch's
// interfaces, the tests and every later feature lean on; a new operation that fits an existing
// one (a parameter, an Options field) keeps the worker's Redis type one that can be read whole.
const maxStoreMethods = 30

// TestStoreSurfaceBounded fails when *Store exports more than maxStoreMethods methods, and
// lists them all so the one to fold into another is easy to pick.
func TestStoreSurfaceBounded(t *testing.T) {
	ty := reflect.TypeFor[*Store]()
	names := make([]string, ty.NumMethod())
	for i := range names {
		names[i] = ty.Method(i).Name
	}
	if len(names) > maxStoreMethods {
		t.Errorf("*stream.Store exports %d methods, at most %d: %s", len(names), maxStoreMethods, strings.Join(names, ", "))
	}
}
