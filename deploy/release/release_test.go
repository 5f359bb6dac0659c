package release

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
)

const testVersion = "v0.0.0-test"

var (
	madeOnce sync.Once
	madeDir  string
	madeErr  error
)

// made is a release made once per test binary, as `make release` makes it but from small
// static programs in place of the worker (the image test covers the worker's own binary): a
// binary and an SBOM per platform, then Make with a key made for the run.
func made(t *testing.T) string {
	t.Helper()
	madeOnce.Do(func() {
		madeDir, madeErr = os.MkdirTemp("", "release-test-")
		if madeErr != nil {
			return
		}
		madeErr = makeTestRelease(madeDir)
	})
	if madeErr != nil {
		t.Fatal(madeErr)
	}
	return madeDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if madeDir != "" {
		os.RemoveAll(madeDir)
	}
	os.Exit(code)
}

func makeTestRelease(dir string) error {
	src, err := os.MkdirTemp("", "release-test-src-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/worker\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() { println(\"worker\") }\n"), 0o644); err != nil {
		return err
	}
	root, err := image.RepoRoot(".")
	if err != nil {
		return err
	}
	var bins, sboms []string
	for _, p := range Platforms {
		arch := strings.TrimPrefix(p, "linux/")
		bin := filepath.Join(dir, "gateway-worker-"+testVersion+"-linux-"+arch)
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
		build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := build.CombinedOutput(); err != nil {
			return &exec.ExitError{Stderr: out}
		}
		sbom := bin + ".spdx.json"
		gen := exec.Command("go", "run", "./internal/product/sbom", "-version", testVersion, "-out", sbom, bin)
		gen.Dir = root
		if out, err := gen.CombinedOutput(); err != nil {
			return &exec.ExitError{Stderr: out}
		}
		bins, sboms = append(bins, bin), append(sboms, sbom)
	}
	os.Unsetenv(KeyEnv)
	return Make(context.Background(), Options{Dir: dir, Version: testVersion, Binaries: bins, SBOMs: sboms, Chart: "../helm/webpush-gateway"})
}

// runCosign runs the pinned cosign with env added to its environment.
func runCosign(t *testing.T, env []string, args ...string) ([]byte, error) {
	t.Helper()
	c := &cosign{env: os.Environ()}
	return c.run(context.Background(), env, args...)
}

// TestRelease: the release holds what `make release` publishes, its index is for both
// platforms, no private key is among its files, and Verify passes with its public key.
func TestRelease(t *testing.T) {
	dir := made(t)
	pub, err := os.ReadFile(filepath.Join(dir, PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Verify(dir, pub)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{SumsFile, SumsSigFile, PublicKeyFile, "webpush-gateway-0.1.0.tgz", LayoutDir(testVersion) + "/index.json",
		"gateway-worker-" + testVersion + "-linux-amd64.spdx.json", "gateway-worker-" + testVersion + "-linux-arm64"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// The index, read as any OCI tool reads the layout.
	lp, err := layout.FromPath(filepath.Join(dir, LayoutDir(testVersion)))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := lp.ImageIndex()
	rm, _ := root.IndexManifest()
	idx, err := root.ImageIndex(rm.Manifests[0].Digest)
	if err != nil || rm.Manifests[0].Annotations[image.RefNameAnnotation] != testVersion {
		t.Fatalf("the layout's first manifest %v is not the index tagged %s: %v", rm.Manifests[0], testVersion, err)
	}
	platforms, _ := image.Platforms(idx)
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) || len(r.Platforms) != 2 || len(r.SBOMs) != 2 {
		t.Errorf("index platforms %v, verified %v", platforms, r.Platforms)
	}
	if r.Repository != DefaultRepository {
		t.Errorf("the signatures name %s, want %s", r.Repository, DefaultRepository)
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if bytes.Contains(data, []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReleaseSignsWithTheGivenKey: with COSIGN_KEY naming an encrypted key of the operator's
// (COSIGN_PASSWORD unlocking it), the release is signed with that key: its cosign.pub is the
// key's public half, Verify passes with it and fails with another release's key, and no file
// of the release holds a private key.
func TestReleaseSignsWithTheGivenKey(t *testing.T) {
	other := made(t) // a release signed with a key made for its run
	keys := t.TempDir()
	const password = "operator-password" // go run -exec splits on spaces
	if _, err := runCosign(t, []string{PasswordEnv + "=" + password}, "generate-key-pair", "--output-key-prefix", filepath.Join(keys, "given")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var bins, sboms []string
	for _, p := range Platforms {
		bin := "gateway-worker-" + testVersion + "-linux-" + strings.TrimPrefix(p, "linux/")
		for _, f := range []string{bin, bin + ".spdx.json"} {
			if err := os.WriteFile(filepath.Join(dir, f), must(os.ReadFile(filepath.Join(other, f))), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		bins, sboms = append(bins, filepath.Join(dir, bin)), append(sboms, filepath.Join(dir, bin+".spdx.json"))
	}
	t.Setenv(KeyEnv, filepath.Join(keys, "given.key"))
	t.Setenv(PasswordEnv, password)
	if err := Make(context.Background(), Options{Dir: dir, Version: testVersion, Binaries: bins, SBOMs: sboms, Chart: "../helm/webpush-gateway"}); err != nil {
		t.Fatal(err)
	}
	given := must(os.ReadFile(filepath.Join(keys, "given.pub")))
	if pub := must(os.ReadFile(filepath.Join(dir, PublicKeyFile))); !bytes.Equal(pub, given) {
		t.Fatalf("the release's %s is not the given key's public half:\n%s", PublicKeyFile, pub)
	}
	if _, err := Verify(dir, given); err != nil {
		t.Fatalf("Verify with the given key: %v", err)
	}
	if _, err := Verify(dir, must(os.ReadFile(filepath.Join(other, PublicKeyFile)))); err == nil {
		t.Error("Verify passed with another release's key")
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if bytes.Contains(must(os.ReadFile(p)), []byte("PRIVATE KEY")) {
			t.Errorf("%s holds a private key", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFailsOnAnyChangedByte: one byte changed in any file of the release, a blob of
// the layout as much as a binary or the sums, makes Verify fail; so does another key.
func TestVerifyFailsOnAnyChangedByte(t *testing.T) {
	dir := made(t)
	pubFile := filepath.Join(dir, PublicKeyFile)
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if len(files) < 20 {
		t.Fatalf("%d files in the release", len(files))
	}
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		i := len(data) / 2
		data[i] ^= 0x01
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		pub, _ := os.ReadFile(pubFile)
		if _, err := Verify(dir, pub); err == nil {
			t.Errorf("Verify passed with byte %d of %s changed", i, rel)
		}
		data[i] ^= 0x01
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pub, _ := os.ReadFile(pubFile)
	if _, err := Verify(dir, pub); err != nil {
		t.Fatalf("the restored release fails: %v", err)
	}
	other, err := os.MkdirTemp("", "other-key-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(other)
	t.Setenv(KeyEnv, "")
	_, otherPub, err := newCosign(context.Background(), nil, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir, otherPub); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("Verify with another key gave %v, want a signature that does not verify", err)
	}
}

// TestLayoutSignaturesStandAlone: the image signatures and attestations are checked for
// themselves, not only through SHA256SUMS: a changed signed payload or SBOM statement in the
// layout fails the layout's check.
func TestLayoutSignaturesStandAlone(t *testing.T) {
	dir := made(t)
	pub, _ := parsePublicKey(must(os.ReadFile(filepath.Join(dir, PublicKeyFile))))
	ld := filepath.Join(dir, LayoutDir(testVersion))
	lp, _ := layout.FromPath(ld)
	root, _ := lp.ImageIndex()
	rm, _ := root.IndexManifest()
	for _, suffix := range []string{".sig", ".att"} {
		var d = rm.Manifests[len(rm.Manifests)-1]
		for _, m := range rm.Manifests {
			if strings.HasSuffix(m.Annotations[image.RefNameAnnotation], suffix) {
				d = m
			}
		}
		img, _ := root.Image(d.Digest)
		m, _ := img.Manifest()
		blobFile := filepath.Join(ld, "blobs", "sha256", m.Layers[0].Digest.Hex)
		data := must(os.ReadFile(blobFile))
		// A digit of the payload's JSON: still JSON, no longer what was signed.
		i := bytes.IndexAny(data[len(data)/2:], "0123456789") + len(data)/2
		changed := slices.Clone(data)
		changed[i] = '0' + (changed[i]-'0'+1)%10
		os.WriteFile(blobFile, changed, 0o644)
		err := verifyLayout(ld, pub, &Report{Platforms: map[string]string{}, SBOMs: map[string]string{}})
		os.WriteFile(blobFile, data, 0o644)
		if err == nil {
			t.Errorf("the layout's check passed with the %s payload changed", suffix)
		}
	}
	if err := verifyLayout(ld, pub, &Report{Platforms: map[string]string{}, SBOMs: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
}

// TestCosignVerifies: cosign itself accepts what the release signed: `cosign verify-blob` the
// sums (and refuses them with a byte changed), and, once Push has copied the layout to a
// registry, `cosign verify` the image index and `cosign verify-attestation` each image's SBOM.
// The registry is a stage on loopback; cosign reaches nothing else.
func TestCosignVerifies(t *testing.T) {
	dir := made(t)
	st, err := newStage("ghcr.io", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pub := filepath.Join(dir, PublicKeyFile)
	sums := filepath.Join(dir, SumsFile)
	if _, err := runCosign(t, st.Env(), "verify-blob", "--key", pub, "--signature", filepath.Join(dir, SumsSigFile), "--insecure-ignore-tlog", sums); err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), SumsFile)
	data := must(os.ReadFile(sums))
	data[10] ^= 0x01
	os.WriteFile(changed, data, 0o644)
	if _, err := runCosign(t, st.Env(), "verify-blob", "--key", pub, "--signature", filepath.Join(dir, SumsSigFile), "--insecure-ignore-tlog", changed); err == nil {
		t.Error("cosign verify-blob accepted the sums with a byte changed")
	}

	if err := Push(filepath.Join(dir, LayoutDir(testVersion)), DefaultRepository, nil, remote.WithTransport(st.Transport())); err != nil {
		t.Fatal(err)
	}
	ref := DefaultRepository + ":" + testVersion
	if out, err := runCosign(t, st.Env(), "verify", "--key", pub, "--insecure-ignore-tlog", ref); err != nil || !bytes.Contains(out, []byte(`"docker-reference":"`+DefaultRepository+`"`)) {
		t.Fatalf("cosign verify %s: %v\n%s", ref, err, out)
	}
	r, err := Verify(dir, must(os.ReadFile(pub)))
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := name.NewRepository(DefaultRepository)
	for p, d := range r.Platforms {
		out, err := runCosign(t, st.Env(), "verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--type", "spdxjson", repo.Digest(d).String())
		if err != nil || !bytes.Contains(out, []byte(`"payloadType":"application/vnd.in-toto+json"`)) {
			t.Errorf("cosign verify-attestation of %s (%s): %v\n%s", p, d, err, out)
		}
	}
	if r := st.Refused(); len(r) > 0 {
		t.Logf("cosign was refused %v (the stage lets it reach the registry only)", r)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDepsBuildThePinnedCosign: scripts/install-deps.sh builds the cosign the release runs, so
// that `make test` does not build it inside a test's time limit.
func TestDepsBuildThePinnedCosign(t *testing.T) {
	script, err := os.ReadFile("../../scripts/install-deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(script, []byte("go run "+CosignPackage+" version")) {
		t.Errorf("scripts/install-deps.sh does not build %s", CosignPackage)
	}
}
