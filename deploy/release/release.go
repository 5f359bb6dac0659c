// Package release makes the files of a gateway release and checks them. Make builds, from the
// worker's Linux binaries and their SPDX SBOMs: the image for each platform gathered in one
// OCI image index, signed with cosign (the index and each image) and with each image's SBOM
// attached as a signed attestation, all in an OCI image layout; the Helm chart packaged; the
// SHA256SUMS of every file and its cosign signature; and the public key that verifies them.
// Verify checks such a directory against a public key as `cosign verify-blob`, `cosign verify`
// and `cosign verify-attestation` would, without cosign or a registry.
//
// cosign signs images in a registry. Make runs one on loopback for the duration (see stage),
// answering as the release's registry host, so that the signatures and attestations name the
// images as they are published; Push copies the layout to the real registry afterwards.
package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
)

// Platforms are the platforms a release builds the worker and its image for.
var Platforms = []string{"linux/amd64", "linux/arm64"}

// DefaultRepository is where the release's image is published, the repository the production
// overlay and the chart pull.
const DefaultRepository = "ghcr.io/webpush-gateway/gateway-worker"

// The files of a release directory beside the binaries, SBOMs, layout and chart.
const (
	SumsFile      = "SHA256SUMS"
	SumsSigFile   = "SHA256SUMS.sig"
	PublicKeyFile = "cosign.pub"
)

// Options say what goes into a release.
type Options struct {
	// Dir is the release directory; it holds the binaries and SBOMs already, and receives the
	// rest.
	Dir string
	// Version is the release (vX.Y.Z), the image's tag.
	Version string
	// Binaries are the worker's static Linux binaries, one per platform of Platforms, and
	// SBOMs their SPDX documents, in the same order. Both lie in Dir.
	Binaries, SBOMs []string
	// Repository is the image's repository (DefaultRepository when empty).
	Repository string
	// Chart is the Helm chart's directory.
	Chart string
	// Cosign is the cosign to run, an executable and its first arguments; empty runs
	// CosignPackage with `go run`.
	Cosign []string
	// Created stamps the images (the Unix epoch when zero).
	Created time.Time
	// Log receives a line per step; nil discards them.
	Log io.Writer
}

// LayoutDir is the OCI image layout's directory in a release of version.
func LayoutDir(version string) string { return "gateway-worker-" + version + "-oci" }

// Make writes the release into o.Dir and checks it with Verify.
func Make(ctx context.Context, o Options) error {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	if len(o.Binaries) != len(Platforms) || len(o.SBOMs) != len(o.Binaries) {
		return fmt.Errorf("release: %d binaries and %d SBOMs, want one of each per platform %v", len(o.Binaries), len(o.SBOMs), Platforms)
	}
	for _, f := range slices.Concat(o.Binaries, o.SBOMs) {
		if rel, err := filepath.Rel(o.Dir, f); err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("release: %s is not in %s", f, o.Dir)
		}
	}
	repo, err := name.NewRepository(o.Repository)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	work, err := os.MkdirTemp("", "gateway-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work) // with the run's private key, if one was made

	logf("image index for %v", Platforms)
	idx, err := image.Index(o.Binaries, image.Options{Version: o.Version, Created: o.Created})
	if err != nil {
		return err
	}
	if got, err := image.Platforms(idx); err != nil || !slices.Equal(got, Platforms) {
		return fmt.Errorf("release: the index is for %v (%v), want %v", got, err, Platforms)
	}

	logf("signing key")
	cs, pub, err := newCosign(ctx, o.Cosign, work)
	if err != nil {
		return err
	}

	st, err := newStage(repo.RegistryStr(), work)
	if err != nil {
		return err
	}
	defer st.Close()
	ropts := []remote.Option{remote.WithTransport(st.Transport()), remote.WithContext(ctx)}
	if err := remote.WriteIndex(repo.Tag(o.Version), idx, ropts...); err != nil {
		return fmt.Errorf("release: push to the %s: %w", st, err)
	}
	idxDigest, err := idx.Digest()
	if err != nil {
		return err
	}
	logf("cosign sign %s (and each platform's image)", repo.Digest(idxDigest.String()))
	if err := cs.signImage(ctx, st.Env(), repo.Digest(idxDigest.String()).String()); err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for i, d := range im.Manifests {
		logf("cosign attest %s (SPDX SBOM of %s)", d.Platform, filepath.Base(o.SBOMs[i]))
		if err := cs.attestSBOM(ctx, st.Env(), repo.Digest(d.Digest.String()).String(), o.SBOMs[i]); err != nil {
			return err
		}
	}
	if r := st.Refused(); len(r) > 0 {
		return fmt.Errorf("release: cosign tried to reach %v beside the registry", r)
	}

	layoutDir := filepath.Join(o.Dir, LayoutDir(o.Version))
	logf("OCI layout %s", layoutDir)
	if err := pullLayout(repo, o.Version, layoutDir, ropts); err != nil {
		return err
	}

	logf("helm package %s", o.Chart)
	if _, err := packageChart(o.Chart, o.Dir); err != nil {
		return err
	}

	if err := os.WriteFile(filepath.Join(o.Dir, PublicKeyFile), pub, 0o644); err != nil {
		return err
	}
	sums, err := Sums(o.Dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, SumsFile), sums, 0o644); err != nil {
		return err
	}
	logf("cosign sign-blob %s", SumsFile)
	if err := cs.signBlob(ctx, filepath.Join(o.Dir, SumsFile), filepath.Join(o.Dir, SumsSigFile)); err != nil {
		return err
	}
	// cosign writes the signature for its owner alone; it is published.
	if err := os.Chmod(filepath.Join(o.Dir, SumsSigFile), 0o644); err != nil {
		return err
	}
	logf("verify")
	_, err = Verify(o.Dir, pub)
	return err
}

// pullLayout writes the image index tagged version, and every signature and attestation the
// registry holds for it and its images, into an OCI image layout at dir.
func pullLayout(repo name.Repository, version, dir string, ropts []remote.Option) error {
	tags, err := remote.List(repo, ropts...)
	if err != nil {
		return fmt.Errorf("release: list tags: %w", err)
	}
	sort.Strings(tags)
	if !slices.Contains(tags, version) {
		return fmt.Errorf("release: the registry has no tag %s (tags %v)", version, tags)
	}
	entries := []image.Tagged{{Tag: version}}
	for _, t := range tags {
		if t != version {
			entries = append(entries, image.Tagged{Tag: t})
		}
	}
	for i := range entries {
		desc, err := remote.Get(repo.Tag(entries[i].Tag), ropts...)
		if err != nil {
			return fmt.Errorf("release: %s: %w", entries[i].Tag, err)
		}
		if desc.MediaType.IsIndex() {
			entries[i].Index, err = desc.ImageIndex()
		} else {
			entries[i].Image, err = desc.Image()
		}
		if err != nil {
			return fmt.Errorf("release: %s: %w", entries[i].Tag, err)
		}
	}
	return image.WriteLayout(dir, entries)
}

// packageChart writes the chart as `helm package` does, NAME-VERSION.tgz in dir, after
// checking its metadata.
func packageChart(chartDir, dir string) (string, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return "", fmt.Errorf("release: chart: %w", err)
	}
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("release: chart: %w", err)
	}
	return chartutil.Save(ch, dir)
}

// Sums is SHA256SUMS of every file below dir but the sums, their signature and the public
// key, as `sha256sum` writes them (hex, two spaces, the path relative to dir), by path:
// `sha256sum -c SHA256SUMS` in dir checks them all, the layout's blobs included.
func Sums(dir string) ([]byte, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == SumsFile || rel == SumsSigFile || rel == PublicKeyFile {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		lines = append(lines, hex.EncodeToString(h.Sum(nil))+"  "+rel+"\n")
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][66:] < lines[j][66:] })
	return []byte(strings.Join(lines, "")), nil
}
