package release

import (
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
)

// Push copies a release's OCI layout to repo: the image index under its tag (the version),
// then the signatures and attestations under theirs (sha256-<digest>.sig and .att), where
// `cosign verify` and `cosign verify-attestation` look for them. The images' digests do not
// change, so the signatures made at release hold in repo too.
func Push(layoutDir, repo string, log io.Writer, opts ...remote.Option) error {
	r, err := name.NewRepository(repo)
	if err != nil {
		return err
	}
	lp, err := layout.FromPath(layoutDir)
	if err != nil {
		return err
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return err
	}
	// The release first: a registry may refuse a signature of a manifest it does not hold.
	var release, sigs []v1.Descriptor
	for _, d := range m.Manifests {
		if strings.HasPrefix(d.Annotations[image.RefNameAnnotation], "sha256-") {
			sigs = append(sigs, d)
		} else {
			release = append(release, d)
		}
	}
	for _, d := range append(release, sigs...) {
		tag := r.Tag(d.Annotations[image.RefNameAnnotation])
		if d.MediaType.IsIndex() {
			idx, err := root.ImageIndex(d.Digest)
			if err == nil {
				err = remote.WriteIndex(tag, idx, opts...)
			}
			if err != nil {
				return fmt.Errorf("push %s: %w", tag, err)
			}
		} else {
			img, err := root.Image(d.Digest)
			if err == nil {
				err = remote.Write(tag, img, opts...)
			}
			if err != nil {
				return fmt.Errorf("push %s: %w", tag, err)
			}
		}
		if log != nil {
			fmt.Fprintf(log, "%s@%s\n", tag, d.Digest)
		}
	}
	return nil
}
