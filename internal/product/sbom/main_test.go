package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

const testVersion = "v9.9.9-sbomtest"

// buildWorker builds the worker the way `make release` does (static, -trimpath, stamped) into
// a temporary directory and returns its path.
func buildWorker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway-worker")
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+mainModule+"/internal/product/buildinfo.stamp="+testVersion,
		"-o", bin, "./cmd/gateway-worker")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gateway-worker: %v\n%s", err, out)
	}
	return bin
}

// goVersionDeps is what `go version -m` lists of bin: module path -> version, replacements
// applied.
func goVersionDeps(t *testing.T, bin string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	deps := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[0] == "dep":
			last = f[1]
			deps[f[1]] = f[2]
		case len(f) >= 3 && f[0] == "=>":
			delete(deps, last)
			deps[f[1]] = f[2]
		}
	}
	if len(deps) == 0 {
		t.Fatalf("go version -m listed no dependencies:\n%s", out)
	}
	return deps
}

func TestSBOMOfTheWorker(t *testing.T) {
	bin := buildWorker(t)
	out := filepath.Join(t.TempDir(), "sbom.json")
	t.Setenv("SOURCE_DATE_EPOCH", "1780000000")
	if err := run([]string{"-out", out, "-name", "gateway-worker-linux-amd64", "-version", testVersion, bin}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc document
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the SBOM is not the document written: %v", err)
	}

	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" {
		t.Errorf("header = %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
	}
	if doc.CreationInfo.Created != "2026-05-28T20:26:40Z" {
		t.Errorf("created = %q, want SOURCE_DATE_EPOCH's 2026-05-28T20:26:40Z", doc.CreationInfo.Created)
	}
	data, _ := os.ReadFile(bin)
	sum := sha256.Sum256(data)
	if !strings.HasSuffix(doc.DocumentNamespace, hex.EncodeToString(sum[:])) {
		t.Errorf("namespace %q does not end in the binary's SHA-256", doc.DocumentNamespace)
	}

	ids := map[string]pkg{}
	valid := regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`)
	for _, p := range doc.Packages {
		if !valid.MatchString(p.SPDXID) {
			t.Errorf("package %s: SPDXID %q is not an SPDX identifier", p.Name, p.SPDXID)
		}
		if _, dup := ids[p.SPDXID]; dup {
			t.Errorf("SPDXID %q given twice", p.SPDXID)
		}
		if p.DownloadLocation == "" || p.LicenseDeclared == "" || p.CopyrightText == "" {
			t.Errorf("package %s lacks a required field: %+v", p.Name, p)
		}
		ids[p.SPDXID] = p
	}
	self := doc.Packages[0]
	if self.Name != "gateway-worker-linux-amd64" || self.VersionInfo != testVersion || self.LicenseDeclared != "Apache-2.0" {
		t.Errorf("the binary's package = %s %s %s; want gateway-worker-linux-amd64 %s Apache-2.0", self.Name, self.VersionInfo, self.LicenseDeclared, testVersion)
	}
	if len(self.Checksums) != 1 || self.Checksums[0].Value != hex.EncodeToString(sum[:]) {
		t.Errorf("the binary's checksum = %+v, want its SHA-256", self.Checksums)
	}
	if want := "pkg:golang/" + mainModule + "@" + testVersion; len(self.ExternalRefs) != 1 || self.ExternalRefs[0].Locator != want {
		t.Errorf("the binary's purl = %+v, want %s", self.ExternalRefs, want)
	}
	for _, s := range []string{"CGO_ENABLED=0", "-trimpath=true", "GOOS="} {
		if !strings.Contains(self.Comment, s) {
			t.Errorf("the binary's comment %q does not record %s", self.Comment, s)
		}
	}

	describes := 0
	for _, r := range doc.Relationships {
		if r.Type == "DESCRIBES" && r.Element == "SPDXRef-DOCUMENT" && r.Related == self.SPDXID {
			describes++
			continue
		}
		if _, ok := ids[r.Related]; !ok || r.Element != self.SPDXID || r.Type != "DEPENDS_ON" {
			t.Errorf("relationship %+v is not the binary depending on a package of the document", r)
		}
	}
	if describes != 1 || len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%d DESCRIBES and %d relationships for %d packages; want 1 and one per package", describes, len(doc.Relationships), len(doc.Packages))
	}

	// Every module `go version -m` names, at its version, and nothing else.
	want := goVersionDeps(t, bin)
	got := map[string]string{}
	for _, p := range doc.Packages[1:] {
		if p.Name == "go" {
			continue
		}
		got[p.Name] = p.VersionInfo
		if len(p.ExternalRefs) != 1 || p.ExternalRefs[0].Locator != "pkg:golang/"+p.Name+"@"+p.VersionInfo {
			t.Errorf("module %s: purl %+v", p.Name, p.ExternalRefs)
		}
	}
	for path, v := range want {
		if got[path] != v {
			t.Errorf("module %s: SBOM has %q, go version -m says %q", path, got[path], v)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("module %s is in the SBOM but not in go version -m", path)
		}
	}
	if got["github.com/redis/go-redis/v9"] == "" {
		t.Errorf("the worker's SBOM lists no go-redis: %v", got)
	}

	// The same binary gives the same document.
	again := filepath.Join(t.TempDir(), "again.json")
	if err := run([]string{"-out", again, "-name", "gateway-worker-linux-amd64", "-version", testVersion, bin}); err != nil {
		t.Fatal(err)
	}
	if raw2, _ := os.ReadFile(again); !bytes.Equal(raw, raw2) {
		t.Error("a second run on the same binary wrote another document")
	}
}

func TestRefusesWhatIsNotAGoBinary(t *testing.T) {
	notGo := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(notGo, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := run([]string{notGo})
	if err == nil || !strings.Contains(err.Error(), "build information") {
		t.Errorf("run on a shell script: %v; want an error about its build information", err)
	}
	if err := run(nil); err == nil {
		t.Error("run with no binary: no error")
	}
}

// A build without -trimpath records its -ldflags: the stamp is read from them.
func TestStampedVersionFromLdflags(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Path: mainModule, Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "-ldflags", Value: "-s -w -X " + mainModule + "/internal/product/buildinfo.stamp=v1.2.3"},
	}}
	if got := describe(bi, "w", "", "00", time.Unix(0, 0)).Packages[0].VersionInfo; got != "v1.2.3" {
		t.Errorf("version = %q, want the stamp v1.2.3", got)
	}
	bi.Settings[0].Value = "-X=" + mainModule + "/internal/product/buildinfo.stamp=v1.2.4"
	if got := describe(bi, "w", "", "00", time.Unix(0, 0)).Packages[0].VersionInfo; got != "v1.2.4" {
		t.Errorf("version = %q, want the stamp v1.2.4", got)
	}
	bi.Settings = nil
	if got := describe(bi, "w", "", "00", time.Unix(0, 0)).Packages[0].VersionInfo; got != "(devel)" {
		t.Errorf("version = %q, want the module version (devel)", got)
	}
}

func TestSPDXID(t *testing.T) {
	if got := spdxID("github.com/redis/go-redis/v9-v9.23.0"); got != "github.com-redis-go-redis-v9-v9.23.0" {
		t.Errorf("spdxID = %q", got)
	}
}
