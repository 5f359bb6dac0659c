package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// root is the repository root, from this package's directory.
const root = "../../.."

// releaseVersion is the VERSION file: the release this tree is of.
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`).MatchString(v) {
		t.Fatalf("VERSION is %q; want a release vMAJOR.MINOR.PATCH", v)
	}
	return v
}

// The VERSION file, the newest release of CHANGELOG.md and the image tag the production overlay
// deploys name one release: what `make release` builds is what the overlay pulls.
func TestVersionFileMatchesOverlayAndChangelog(t *testing.T) {
	v := releaseVersion(t)

	b, err := os.ReadFile(filepath.Join(root, "deploy/overlays/production/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Images []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatalf("deploy/overlays/production/kustomization.yaml: %v", err)
	}
	found := false
	for _, img := range k.Images {
		if img.Name != "gateway-worker" {
			continue
		}
		found = true
		if img.NewTag != v {
			t.Errorf("the production overlay deploys gateway-worker:%s, VERSION is %s: make release builds %s", img.NewTag, v, v)
		}
		if img.NewName != "ghcr.io/webpush-gateway/gateway-worker" {
			t.Errorf("the production overlay pulls %s; make release tags its image ghcr.io/webpush-gateway/gateway-worker", img.NewName)
		}
	}
	if !found {
		t.Error("the production overlay sets no image for gateway-worker")
	}

	cl, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$`).FindSubmatch(cl)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading (## [X.Y.Z] - YYYY-MM-DD)")
	}
	if got := "v" + string(m[1]); got != v {
		t.Errorf("CHANGELOG.md's newest release is %s, VERSION is %s", got, v)
	}
	if !strings.Contains(string(cl), "## [Unreleased]") {
		t.Error("CHANGELOG.md has no [Unreleased] section")
	}
}

func lookMake(t *testing.T) string {
	t.Helper()
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is not on PATH (%v); install it (Debian: apt-get install make)", err)
	}
	return mk
}

// With no tag to describe HEAD (here: no git repository at all), the Makefile's VERSION is the
// VERSION file.
func TestMakefileFallsBackToVersionFile(t *testing.T) {
	mk := lookMake(t)
	dir := t.TempDir()
	for _, f := range []string{"Makefile", "VERSION"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(mk, "-s", "--no-print-directory", "version")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), releaseVersion(t); got != want {
		t.Errorf("make version outside git = %q, want the VERSION file's %q", got, want)
	}
}

// makeLdflags is the -ldflags value of the go build command `make -n TARGET VERSION=version`
// would run.
func makeLdflags(t *testing.T, target, version string) string {
	t.Helper()
	cmd := exec.Command(lookMake(t), "-n", "--no-print-directory", target, "VERSION="+version)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, out)
	}
	m := regexp.MustCompile(`go build .*-ldflags '([^']*)'`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("make -n %s runs no go build with -ldflags '...':\n%s", target, out)
	}
	return string(m[1])
}

// `make build` and `make image-binary` (what `make image` and `make release` put in the image
// and dist/) stamp the version: the worker built with their -ldflags says it.
func TestMakeStampsTheVersion(t *testing.T) {
	const v = "v9.8.7-stamptest"
	flags := makeLdflags(t, "build", v)
	if img := makeLdflags(t, "image-binary", v); !strings.Contains(img, flags) || !strings.Contains(img, "-s -w") {
		t.Errorf("make image-binary links with %q; want make build's %q and -s -w", img, flags)
	}
	bin := filepath.Join(t.TempDir(), "gateway-worker")
	build := exec.Command("go", "build", "-ldflags", flags, "-o", bin, "./cmd/gateway-worker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -ldflags %q: %v\n%s", flags, err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("gateway-worker version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "gateway-worker "+v+" ("+runtime.Version()+")"; got != want {
		t.Errorf("gateway-worker version printed %q, want %q", got, want)
	}
}
