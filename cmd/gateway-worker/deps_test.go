package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbiddenDeps are what the product binary must never link: the lab's and the simulator's
// code and the libraries only they use. A dependency path matches an entry equal to it or
// below it.
var forbiddenDeps = []string{
	"github.com/alicebob/miniredis",
	"github.com/yuin/gopher-lua",
	"github.com/SherClockHolmes/webpush-go",
	"golang.org/x/image",
	"github.com/webpush-gateway/webpush-gateway/pushsim",
	"github.com/webpush-gateway/webpush-gateway/internal/lab",
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport",
}

// TestLinksOnlyTheProduct lists what `go build ./cmd/gateway-worker` links (go list -deps, tests
// excluded) and fails naming every forbidden package in it.
func TestLinksOnlyTheProduct(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.Command("go", "list", "-deps", "./cmd/gateway-worker")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/gateway-worker in %s: %v", root, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || !slices.Contains(deps, "github.com/webpush-gateway/webpush-gateway/dispatch") {
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
