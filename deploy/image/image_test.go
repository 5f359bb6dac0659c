package image_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
)

// The lab (simulator, demo, bench) ships as other binaries; none of it may reach the image.
var (
	// labFiles are names no file in the image may have.
	labFiles = []string{"pushsim", "gateway-lab"}
	// labModules are modules only the lab uses, the lab's own among them; the worker's build
	// info must not list them.
	labModules = []string{"pushsim", "miniredis", "gopher-lua", "webpush-go", "golang.org/x/image", "webpush-gateway/lab"}
	// labPackages are the repository's lab packages (everything under lab/, the lab's module);
	// no function of theirs may be linked.
	labPackages = []string{"pushsim", "lab/", "cmd/pushsim"}
)

// versionLine is what `gateway-worker version` prints: name, version, the Go that built it.
var versionLine = regexp.MustCompile(`^gateway-worker \S+ \(go[0-9][^)]*\)\n$`)

// wantFiles is every entry of the image's file system; anything else is a failure.
var wantFiles = []string{
	"etc/", "etc/group", "etc/nsswitch.conf", "etc/passwd", "etc/ssl/", "etc/ssl/certs/",
	"etc/ssl/certs/ca-certificates.crt", "gateway-worker",
}

// TestImage builds the worker the way `make image` does, assembles the tarball, reads it back
// with its own tar and JSON reading (and through go-containerregistry's docker-tarball reader,
// the path `docker load` takes) and checks what would run: a non-root numeric user, the
// entrypoint printing a version line, the CA bundle, and nothing of the lab. It fails if the
// Dockerfile-equivalent facts drift (a root user, a shell-form entrypoint, a missing bundle, a
// writable path, a lab package linked into the worker).
func TestImage(t *testing.T) {
	root, err := image.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway-worker")
	if err := image.Compile(context.Background(), root, bin, ""); err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(image.Options{Binary: bin, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "image.tar")
	if err := image.WriteFile(tarPath, img, image.DefaultRef); err != nil {
		t.Fatal(err)
	}

	blobs, meta := readTarball(t, tarPath)

	// The OCI layout: one manifest, tagged, whose blobs are all present and match their digests.
	if got := string(meta["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	var index v1.IndexManifest
	mustJSON(t, meta["index.json"], &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	if desc.Annotations["io.containerd.image.name"] != image.DefaultRef || desc.Annotations["org.opencontainers.image.ref.name"] != "dev" {
		t.Errorf("index annotations %v, want the ref %s", desc.Annotations, image.DefaultRef)
	}
	var manifest v1.Manifest
	mustJSON(t, blob(t, blobs, desc.Digest.Hex, desc.Size), &manifest)
	if manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" || manifest.Config.MediaType != "application/vnd.oci.image.config.v1+json" {
		t.Errorf("media types %s / %s, want OCI manifest and config", manifest.MediaType, manifest.Config.MediaType)
	}
	var cfg v1.ConfigFile
	mustJSON(t, blob(t, blobs, manifest.Config.Digest.Hex, manifest.Config.Size), &cfg)

	// The docker-save view of the same tarball names the same config and layers.
	var dm []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	mustJSON(t, meta["manifest.json"], &dm)
	wantLayers := []string{}
	for _, l := range manifest.Layers {
		wantLayers = append(wantLayers, "blobs/sha256/"+l.Digest.Hex)
	}
	if len(dm) != 1 || dm[0].Config != "blobs/sha256/"+manifest.Config.Digest.Hex || !slices.Equal(dm[0].Layers, wantLayers) ||
		!slices.Equal(dm[0].RepoTags, []string{image.DefaultRef}) {
		t.Errorf("manifest.json = %+v, want config %s, layers %v, tag %s", dm, manifest.Config.Digest, wantLayers, image.DefaultRef)
	}
	loaded, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("go-containerregistry cannot read the tarball as docker load would: %v", err)
	}
	if got, err := loaded.ConfigName(); err != nil || got != manifest.Config.Digest {
		t.Errorf("docker-tarball view: config %v (%v), want %v", got, err, manifest.Config.Digest)
	}

	// The config: what a container runtime runs.
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	// Numeric and not 0, so that the kubelet can enforce runAsNonRoot; 65532 is the user the
	// manifests run as (runAsUser, fsGroup).
	if cfg.Config.User != "65532:65532" || !regexp.MustCompile(`^[1-9][0-9]*:[1-9][0-9]*$`).MatchString(cfg.Config.User) {
		t.Errorf("User = %q, want the numeric non-root 65532:65532", cfg.Config.User)
	}
	if diff := cmp.Diff([]string{"/gateway-worker"}, cfg.Config.Entrypoint); diff != "" {
		t.Errorf("Entrypoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run"}, cfg.Config.Cmd); diff != "" {
		t.Errorf("Cmd (-want +got):\n%s", diff)
	}
	if _, ok := cfg.Config.ExposedPorts["9090/tcp"]; !ok {
		t.Errorf("ExposedPorts %v, want 9090/tcp", cfg.Config.ExposedPorts)
	}
	if len(cfg.RootFS.DiffIDs) != len(manifest.Layers) {
		t.Fatalf("%d diff ids for %d layers", len(cfg.RootFS.DiffIDs), len(manifest.Layers))
	}

	// The file system: exactly the expected entries, all root's, none writable.
	fsys := map[string][]byte{}
	var names []string
	for i, l := range manifest.Layers {
		layer := blob(t, blobs, l.Digest.Hex, l.Size)
		zr, err := gzip.NewReader(bytes.NewReader(layer))
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != cfg.RootFS.DiffIDs[i].String() {
			t.Errorf("layer %d: uncompressed digest is not the config's diff id", i)
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			names = append(names, h.Name)
			for _, lab := range labFiles {
				if strings.Contains(path.Base(strings.TrimSuffix(h.Name, "/")), lab) {
					t.Errorf("image holds %s: lab binaries stay out of the worker's image", h.Name)
				}
			}
			if h.Uid != 0 || h.Gid != 0 {
				t.Errorf("%s belongs to %d:%d, want root's (the worker must not own its files)", h.Name, h.Uid, h.Gid)
			}
			if h.Mode&0o222 != 0 {
				t.Errorf("%s has mode %o: nothing in the image may be writable", h.Name, h.Mode)
			}
			body, _ := io.ReadAll(tr)
			fsys[h.Name] = body
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff(wantFiles, names); diff != "" {
		t.Errorf("image files (-want +got):\n%s", diff)
	}
	if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(fsys["etc/passwd"]) ||
		!regexp.MustCompile(`(?m)^nonroot:x:65532:`).Match(fsys["etc/group"]) {
		t.Errorf("passwd/group do not name nonroot as 65532:\n%s\n%s", fsys["etc/passwd"], fsys["etc/group"])
	}
	certs := fsys["etc/ssl/certs/ca-certificates.crt"]
	host, err := os.ReadFile(image.DefaultCABundle)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(certs, host) {
		t.Errorf("CA bundle in the image (%d bytes) is not the build machine's (%d bytes)", len(certs), len(host))
	}
	if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(certs) || bytes.Count(certs, []byte("BEGIN CERTIFICATE")) < 10 {
		t.Errorf("CA bundle holds %d certificates, want a real bundle", bytes.Count(certs, []byte("BEGIN CERTIFICATE")))
	}

	// The binary: runs `version` as the entrypoint would, statically linked, no lab code.
	worker := filepath.Join(dir, "extracted-gateway-worker")
	if err := os.WriteFile(worker, fsys["gateway-worker"], 0o555); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(worker, "version")
	cmd.Env = []string{} // the image sets no environment the worker needs
	out, err := cmd.CombinedOutput()
	if err != nil || !versionLine.Match(out) {
		t.Errorf("%s version: %v, output %q; want one line like \"gateway-worker v1.2.3 (go1.26.8)\"", image.BinaryPath, err, out)
	}
	bi, err := buildinfo.ReadFile(worker)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range bi.Deps {
		for _, lab := range labModules {
			if strings.Contains(d.Path, lab) {
				t.Errorf("the worker links module %s %s, which only the lab needs", d.Path, d.Version)
			}
		}
	}
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" && s.Value != "0" {
			t.Errorf("built with CGO_ENABLED=%s, want 0", s.Value)
		}
		if s.Key == "-trimpath" && s.Value != "true" {
			t.Errorf("built without -trimpath")
		}
	}
	for _, pkg := range linkedPackages(t, worker) {
		for _, lab := range labPackages {
			if strings.HasPrefix(pkg, bi.Main.Path+"/"+lab) {
				t.Errorf("the worker links package %s, which belongs to the lab", pkg)
				break
			}
		}
	}
}

// TestBuildRefusesDynamicBinary: a binary that needs a C library would not start in an image
// without one, so Build refuses it with a message that says how to build it instead.
func TestBuildRefusesDynamicBinary(t *testing.T) {
	var dynamic string
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		if f, err := elf.Open(p); err == nil {
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP {
					dynamic = p
				}
			}
			f.Close()
		}
		if dynamic != "" {
			break
		}
	}
	if dynamic == "" {
		t.Fatal("no dynamically linked executable found on this machine to test with")
	}
	_, err := image.Build(image.Options{Binary: dynamic})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("Build(%s) = %v, want a refusal naming CGO_ENABLED=0", dynamic, err)
	}
	text := filepath.Join(t.TempDir(), "not-elf")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := image.Build(image.Options{Binary: text}); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Fatalf("Build(script) = %v, want a refusal saying it is not an ELF executable", err)
	}
}

// readTarball returns the blobs of the layout by hex digest (each checked against its name)
// and the other files by name.
func readTarball(t *testing.T, name string) (blobs, meta map[string][]byte) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blobs, meta = map[string][]byte{}, map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return blobs, meta
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if hexDigest, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok {
			if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != hexDigest {
				t.Errorf("blob %s does not hash to its name", h.Name)
			}
			blobs[hexDigest] = body
			continue
		}
		meta[h.Name] = body
	}
}

func blob(t *testing.T, blobs map[string][]byte, hexDigest string, size int64) []byte {
	t.Helper()
	b, ok := blobs[hexDigest]
	if !ok {
		t.Fatalf("blob sha256:%s is referenced but not in the tarball", hexDigest)
	}
	if int64(len(b)) != size {
		t.Fatalf("blob sha256:%s is %d bytes, its descriptor says %d", hexDigest, len(b), size)
	}
	return b
}

func mustJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, data)
	}
}

// linkedPackages lists the packages with a function in the binary, from its pclntab (present
// even in a binary built with -s -w: the runtime needs it for stack traces).
func linkedPackages(t *testing.T, name string) []string {
	t.Helper()
	f, err := elf.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec, text := f.Section(".gopclntab"), f.Section(".text")
	if sec == nil || text == nil {
		t.Fatalf("%s has no .gopclntab or .text section", name)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	table, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, fn := range table.Funcs {
		if p := fn.PackageName(); p != "" {
			seen[p] = true
		}
	}
	if len(seen) < 20 {
		t.Fatalf("only %d packages read from the pclntab: the reader is broken", len(seen))
	}
	return slices.Sorted(func(yield func(string) bool) {
		for p := range seen {
			if !yield(p) {
				return
			}
		}
	})
}

// TestRepoRoot finds the product's module from inside the deploy module, whose own go.mod is
// nearer, and finds nothing outside the repository.
func TestRepoRoot(t *testing.T) {
	root, err := image.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(image.WorkerPackage), "main.go")); err != nil {
		t.Fatalf("RepoRoot = %s, which has no %s: %v", root, image.WorkerPackage, err)
	}
	if _, err := os.Stat(filepath.Join(root, "deploy", "go.mod")); err != nil {
		t.Fatalf("RepoRoot = %s, which has no deploy/go.mod: %v", root, err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := image.RepoRoot(outside); err == nil && got == outside {
		t.Fatalf("RepoRoot(%s) = %s, a module that is not the product's", outside, got)
	}
}
