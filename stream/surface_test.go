package stream

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestStoreIsTheWorkers: *Store is the worker's, each of its exported methods one that a loop of
// the worker says it needs in an interface of dispatch (dispatch/store.go, entry.go, ...),
// apart from Close and Producer, for whoever made the Store. An operator's query belongs to
// stream/inspect, a read the worker and the operators both make to Keyspace; a method no
// worker's loop calls belongs to neither Store nor the worker.
func TestStoreIsTheWorkers(t *testing.T) {
	declared := map[string]bool{} // the methods of every interface dispatch declares
	files, err := filepath.Glob(filepath.Join("..", "dispatch", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if it, ok := n.(*ast.InterfaceType); ok {
				for _, m := range it.Methods.List {
					for _, name := range m.Names {
						declared[name.Name] = true
					}
				}
			}
			return true
		})
	}
	if !declared["ReadIntake"] || !declared["Finish"] {
		t.Fatalf("dispatch's interfaces (%d files read) declare neither ReadIntake nor Finish: not dispatch's sources", len(files))
	}
	ty := reflect.TypeFor[*Store]()
	for i := range ty.NumMethod() {
		name := ty.Method(i).Name
		if !declared[name] && name != "Close" && name != "Producer" {
			t.Errorf("*stream.Store has %s, which no interface of dispatch declares: a worker's loop names what it needs of the Store; an operator's query is stream/inspect's, a read both make Keyspace's", name)
		}
	}
}
