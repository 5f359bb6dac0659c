package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The rules of the module's layering that an import shows, checked on what `go list` says of
// the packages (their non-test files): what the product binary links, where tables and command
// lines are handled, and who talks to Redis.

const module = "github.com/webpush-gateway/webpush-gateway"

// forbiddenDeps are what the product binary must never link: the lab's and the simulator's
// code and the libraries only they use. A dependency path matches an entry equal to it or
// below it.
var forbiddenDeps = []string{
	"github.com/alicebob/miniredis",
	"github.com/yuin/gopher-lua",
	"github.com/SherClockHolmes/webpush-go",
	"golang.org/x/image",
	module + "/pushsim",
	module + "/lab", // a module of its own, which the product's go.mod does not require
	module + "/internal/testsupport",
}

// goPackage is a package as `go list -json` describes it.
type goPackage struct {
	ImportPath string
	Name       string
	Imports    []string
}

// goList runs `go list -json` with args in the module's root and returns the packages it
// lists.
func goList(t *testing.T, args ...string) []goPackage {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json %s in %s: %v", strings.Join(args, " "), root, err)
	}
	var pkgs []goPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json %s: %v", strings.Join(args, " "), err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list -json %s listed no package", strings.Join(args, " "))
	}
	return pkgs
}

// under reports whether import path p is dir of the module or below it.
func under(p, dir string) bool {
	return p == module+"/"+dir || strings.HasPrefix(p, module+"/"+dir+"/")
}

// productPackages are the module's packages the rules of its layering apply to: every one but
// the tests' support and the test-only packages of test/ (the lab is a module of its own),
// which are tools of their own and never linked by the product (TestLinksOnlyTheProduct).
func productPackages(t *testing.T) []goPackage {
	t.Helper()
	var out []goPackage
	for _, p := range goList(t, "./...") {
		if !under(p.ImportPath, "internal/testsupport") && !under(p.ImportPath, "test") {
			out = append(out, p)
		}
	}
	if !slices.ContainsFunc(out, func(p goPackage) bool { return p.ImportPath == module+"/dispatch" }) {
		t.Fatalf("the module's packages lack dispatch: not the module's list (%d packages)", len(out))
	}
	return out
}

// TestLinksOnlyTheProduct lists what `go build ./cmd/gateway-worker` links (go list -deps, tests
// excluded) and fails naming every forbidden package in it.
func TestLinksOnlyTheProduct(t *testing.T) {
	var deps []string
	for _, p := range goList(t, "-deps", "./cmd/gateway-worker") {
		deps = append(deps, p.ImportPath)
	}
	if !slices.Contains(deps, module+"/dispatch") {
		t.Fatalf("go list -deps gave %d packages without dispatch: not the worker's list", len(deps))
	}
	for _, dep := range deps {
		for _, bad := range forbiddenDeps {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("gateway-worker links %s (forbidden: %s)", dep, bad)
			}
		}
	}
}

// TestOnlyCommandsPrintTablesAndReadFlags: a package's queries and operations return data, and
// the commands print it and read the command line. So of the product's packages only the
// commands (package main) and internal/product/cli, the commands' one flag set and help, may
// import text/tabwriter, which lays out tables, or flag.
func TestOnlyCommandsPrintTablesAndReadFlags(t *testing.T) {
	for _, p := range productPackages(t) {
		if p.Name == "main" || p.ImportPath == module+"/internal/product/cli" {
			continue
		}
		for _, imp := range []string{"text/tabwriter", "flag"} {
			if slices.Contains(p.Imports, imp) {
				t.Errorf("%s imports %s: tables and command lines belong to the commands (cmd/, internal/product/cli); return data instead", p.ImportPath, imp)
			}
		}
	}
}

// TestOnlyStreamTalksToRedis: stream and the packages below it are the product's only code that
// talks to Redis, so of the product's packages only those and the commands, which hand the
// clients a hook and a logger, may import go-redis.
func TestOnlyStreamTalksToRedis(t *testing.T) {
	const goRedis = "github.com/redis/go-redis"
	found := false
	for _, p := range productPackages(t) {
		talks := slices.ContainsFunc(p.Imports, func(imp string) bool { return imp == goRedis || strings.HasPrefix(imp, goRedis+"/") })
		found = found || talks && under(p.ImportPath, "stream")
		if talks && p.Name != "main" && !under(p.ImportPath, "stream") {
			t.Errorf("%s imports go-redis: only stream/ talks to Redis; add what it needs there", p.ImportPath)
		}
	}
	if !found {
		t.Fatal("no package under stream/ imports go-redis: not the imports this test is about")
	}
}

// TestTheWorkerNeverLinksTheInspector: the operators' queries (stream/inspect) may scan and be
// slow, and are no part of delivering: nothing the worker runs (dispatch and all it links, the
// worker's stream among them) imports them. Only a command may.
func TestTheWorkerNeverLinksTheInspector(t *testing.T) {
	const inspect = module + "/stream/inspect"
	worker := goList(t, "-deps", "./dispatch")
	if !slices.ContainsFunc(worker, func(p goPackage) bool { return p.ImportPath == module+"/stream" }) {
		t.Fatalf("go list -deps ./dispatch gave %d packages without stream: not the worker's list", len(worker))
	}
	for _, p := range worker {
		if p.ImportPath == inspect {
			t.Errorf("the worker (dispatch) links %s", inspect)
		}
		if slices.Contains(p.Imports, inspect) {
			t.Errorf("%s, which the worker links, imports %s", p.ImportPath, inspect)
		}
	}
	for _, p := range productPackages(t) {
		if slices.Contains(p.Imports, inspect) && p.Name != "main" {
			t.Errorf("%s imports %s: only the commands use the operators' queries", p.ImportPath, inspect)
		}
	}
}
