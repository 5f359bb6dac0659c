package stream

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestScriptNamesListEveryScript reads the package's source: every variable set to
// redis.NewScript must be in namedScripts, so that a script added later has a name too.
func TestScriptNamesListEveryScript(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var declared, named []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, v := range n.Values {
					if call, ok := v.(*ast.CallExpr); ok && isSelector(call.Fun, "redis", "NewScript") {
						declared = append(declared, n.Names[i].Name)
					}
				}
				if n.Names[0].Name == "namedScripts" {
					ast.Inspect(n.Values[0], func(m ast.Node) bool {
						if kv, ok := m.(*ast.CompositeLit); ok && len(kv.Elts) == 2 {
							if id, ok := kv.Elts[1].(*ast.Ident); ok {
								named = append(named, id.Name)
							}
						}
						return true
					})
				}
			}
			return true
		})
	}
	slices.Sort(declared)
	slices.Sort(named)
	if len(declared) < 20 || !slices.Equal(declared, named) {
		t.Errorf("scripts declared %v\nnamed %v", declared, named)
	}
	seen := map[string]string{}
	for _, s := range namedScripts {
		if other, dup := seen[s.script.Hash()]; dup {
			t.Errorf("%s and %s have one hash", s.name, other)
		}
		seen[s.script.Hash()] = s.name
	}
	if n, ok := ScriptName(finishScript.Hash()); !ok || n != "finish.lua" {
		t.Errorf("finish's hash: %q, %v", n, ok)
	}
	if n, ok := ScriptName(strings.Repeat("0", 40)); ok {
		t.Errorf("an unknown hash named %q", n)
	}
}

func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}
