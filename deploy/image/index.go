package image

import (
	"fmt"
	"os"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefNameAnnotation is the annotation an OCI image layout names a manifest (a tag) with.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// Index builds one image per binary (each a static Linux executable of its own architecture,
// see Build; o.Binary is ignored) and gathers them in an OCI image index, each manifest's
// descriptor carrying its platform, so that a runtime pulls the image of its own. Manifests are
// in the order of their platforms' names, so the same binaries give the same index digest.
func Index(binaries []string, o Options) (v1.ImageIndex, error) {
	if len(binaries) == 0 {
		return nil, fmt.Errorf("image: no binaries for the index")
	}
	type entry struct {
		platform v1.Platform
		img      v1.Image
	}
	var entries []entry
	seen := map[string]string{}
	for _, bin := range binaries {
		bo := o
		bo.Binary = bin
		img, err := Build(bo)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image: %w", err)
		}
		p := v1.Platform{OS: cf.OS, Architecture: cf.Architecture}
		if other, dup := seen[p.String()]; dup {
			return nil, fmt.Errorf("image: %s and %s are both for %s", other, bin, p)
		}
		seen[p.String()] = bin
		entries = append(entries, entry{p, img})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].platform.String() < entries[j].platform.String() })
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, e := range entries {
		p := e.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        e.img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
	}
	return idx, nil
}

// Platforms lists the platforms of an index's manifests, in its order.
func Platforms(idx v1.ImageIndex) ([]string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m.Manifests {
		if d.Platform != nil {
			out = append(out, d.Platform.String())
		}
	}
	return out, nil
}

// Tagged is an image or an image index and the tag it goes under in a layout.
type Tagged struct {
	Tag   string
	Image v1.Image      // one of Image and Index
	Index v1.ImageIndex // one of Image and Index
}

// WriteLayout writes an OCI image layout directory at dir (which must not exist yet): the
// blobs of every entry, and index.json listing each entry under its tag, in the order given.
// crane, oras, skopeo (oci:DIR:TAG) and containerd read it.
func WriteLayout(dir string, entries []Tagged) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("image: %s exists", dir)
	}
	p, err := layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	for _, e := range entries {
		opt := layout.WithAnnotations(map[string]string{RefNameAnnotation: e.Tag})
		switch {
		case e.Index != nil:
			err = p.AppendIndex(e.Index, opt)
		case e.Image != nil:
			err = p.AppendImage(e.Image, opt)
		default:
			err = fmt.Errorf("nothing to write under %s", e.Tag)
		}
		if err != nil {
			return fmt.Errorf("image: layout %s: %w", e.Tag, err)
		}
	}
	return nil
}
