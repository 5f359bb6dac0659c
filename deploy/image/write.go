package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultRef is the name the tarball gives the image: the dev overlay's image, so that
// `kind load image-archive` or `docker load` of the tarball is what that overlay runs.
const DefaultRef = "gateway-worker:dev"

// ociLayout is the content of the layout's oci-layout file.
const ociLayout = `{"imageLayoutVersion":"1.0.0"}`

// dockerManifest is one entry of the manifest.json that `docker save` writes and `docker
// load` (before OCI layouts were understood) and go-containerregistry's tarball package read.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// WriteFile writes img to path as a tarball (see Write), through a temporary file in the same
// directory so that a failed build never leaves half an image behind.
func WriteFile(path string, img v1.Image, ref string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := Write(tmp, img, ref); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	// CreateTemp makes the file private; an image is for anyone who may read the directory.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}

// Write writes img as an OCI image layout (oci-layout, index.json, blobs/sha256/...) in a tar
// stream, tagged ref, with a docker-save manifest.json that points at the same blobs. Entries
// are in a fixed order with fixed times, so the same image always gives the same bytes.
func Write(w io.Writer, img v1.Image, ref string) error {
	if ref == "" {
		ref = DefaultRef
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image: manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image: digest: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return fmt.Errorf("image: media type: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image: config: %w", err)
	}
	configName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("image: config digest: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image: layers: %w", err)
	}

	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt,
			Digest:    digest,
			Size:      int64(len(manifest)),
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": tagOf(ref),
				"io.containerd.image.name":          ref,
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("image: index: %w", err)
	}
	dm := []dockerManifest{{Config: layerPath(configName), RepoTags: []string{ref}}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("image: layer digest: %w", err)
		}
		dm[0].Layers = append(dm[0].Layers, layerPath(d))
	}
	dmJSON, err := json.Marshal(dm)
	if err != nil {
		return fmt.Errorf("image: manifest.json: %w", err)
	}

	tw := tar.NewWriter(w)
	put := func(name string, size int64, body io.Reader) error {
		h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o444, Size: size, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("image: write %s: %w", name, err)
		}
		if _, err := io.Copy(tw, body); err != nil {
			return fmt.Errorf("image: write %s: %w", name, err)
		}
		return nil
	}
	putBytes := func(name string, b []byte) error { return put(name, int64(len(b)), bytesReader(b)) }
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o555, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("image: write %s: %w", d, err)
		}
	}
	if err := putBytes("oci-layout", []byte(ociLayout)); err != nil {
		return err
	}
	if err := putBytes("index.json", indexJSON); err != nil {
		return err
	}
	if err := putBytes("manifest.json", dmJSON); err != nil {
		return err
	}
	if err := putBytes(layerPath(digest), manifest); err != nil {
		return err
	}
	if err := putBytes(layerPath(configName), config); err != nil {
		return err
	}
	for _, l := range layers {
		if err := putLayer(put, l); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image: %w", err)
	}
	return nil
}

func putLayer(put func(string, int64, io.Reader) error, l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return fmt.Errorf("image: layer digest: %w", err)
	}
	size, err := l.Size()
	if err != nil {
		return fmt.Errorf("image: layer size: %w", err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return fmt.Errorf("image: layer %s: %w", d, err)
	}
	defer rc.Close()
	return put(layerPath(d), size, rc)
}

// tagOf is the tag part of a reference ("gateway-worker:dev" -> "dev"), what OCI layouts put
// in org.opencontainers.image.ref.name; a reference without a tag is "latest".
func tagOf(ref string) string {
	for i := len(ref) - 1; i >= 0; i-- {
		switch ref[i] {
		case ':':
			return ref[i+1:]
		case '/':
			return "latest"
		}
	}
	return "latest"
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
