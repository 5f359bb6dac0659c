// Package image assembles the gateway-worker container image without a container daemon or a
// registry, the way ko does: an empty base, one layer with the CA bundle and a user database
// that names the non-root user, and one layer with the statically linked binary. The image is
// written as an OCI image layout in a tarball (with a docker-save manifest beside it), which
// `docker load`, `podman load`, `skopeo copy oci-archive:`, `kind load image-archive` and
// `crane push` all read. deploy/Dockerfile builds the equivalent image for people with a daemon.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts; the deploy manifests and the image test read them from here.
const (
	// UID and GID of the user the worker runs as: distroless's "nonroot".
	UID = 65532
	GID = 65532
	// User is the config's User field, numeric so that runAsNonRoot can verify it without
	// reading /etc/passwd.
	User = "65532:65532"
	// BinaryPath is where the worker lives and the image's entrypoint.
	BinaryPath = "/gateway-worker"
	// CABundlePath is where the CA certificates are, the path Go's crypto/x509 reads first on
	// Linux; SSL_CERT_FILE names it too.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultCABundle is the build machine's bundle (Debian's ca-certificates package).
	DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"
	// MetricsPort is the port `run --http` listens on by default, exposed in the config.
	MetricsPort = "9090/tcp"
)

// Entrypoint and Cmd of the image: `docker run IMAGE` runs the worker, `docker run IMAGE
// version` prints its version.
var (
	Entrypoint = []string{BinaryPath}
	Cmd        = []string{"run"}
)

// Options say what goes into the image.
type Options struct {
	// Binary is a statically linked Linux gateway-worker (see Compile). Required.
	Binary string
	// CABundle is a PEM file of CA certificates; DefaultCABundle when empty.
	CABundle string
	// Version goes into the org.opencontainers.image.version label; empty leaves it out.
	Version string
	// Created stamps the image and every file in it. The zero value means the Unix epoch, so
	// that the same binary and bundle always give the same image digest.
	Created time.Time
}

// Build assembles the image. It refuses a binary that is not a statically linked Linux ELF
// executable, since the image has no dynamic loader or C library for it to use.
func Build(o Options) (v1.Image, error) {
	if o.Binary == "" {
		return nil, errors.New("image: no binary given")
	}
	arch, err := staticLinuxArch(o.Binary)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: read binary: %w", err)
	}
	bundle := o.CABundle
	if bundle == "" {
		bundle = DefaultCABundle
	}
	certs, err := os.ReadFile(bundle)
	if err != nil {
		return nil, fmt.Errorf("image: read CA bundle: %w (install Debian's ca-certificates or pass another bundle)", err)
	}
	if !bytes.Contains(certs, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("image: CA bundle %s holds no PEM certificate", bundle)
	}
	created := o.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()

	base, err := layer(created, []file{
		{name: "etc/", dir: true},
		{name: "etc/group", body: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", body: []byte("hosts: files dns\n")},
		{name: "etc/passwd", body: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n")},
		{name: "etc/ssl/", dir: true},
		{name: "etc/ssl/certs/", dir: true},
		{name: CABundlePath[1:], body: certs},
	})
	if err != nil {
		return nil, err
	}
	worker, err := layer(created, []file{{name: BinaryPath[1:], body: bin, exec: true}})
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "deploy/image: CA bundle, passwd and group naming nonroot (65532)"}},
		mutate.Addendum{Layer: worker, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "deploy/image: " + BinaryPath + " (CGO_ENABLED=0, -trimpath)"}},
	)
	if err != nil {
		return nil, fmt.Errorf("image: add layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = v1.Time{Time: created}
	labels := map[string]string{
		"org.opencontainers.image.title":  "gateway-worker",
		"org.opencontainers.image.source": "https://github.com/webpush-gateway/webpush-gateway",
	}
	if o.Version != "" {
		labels["org.opencontainers.image.version"] = o.Version
	}
	cf.Config = v1.Config{
		User:         User,
		Entrypoint:   Entrypoint,
		Cmd:          Cmd,
		WorkingDir:   "/",
		Env:          []string{"PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=" + CABundlePath},
		ExposedPorts: map[string]struct{}{MetricsPort: {}},
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: set config: %w", err)
	}
	return img, nil
}

// file is one entry of a layer. Every entry belongs to root and nothing is writable: the
// worker runs as 65532 on a read-only root file system and needs no writable path.
type file struct {
	name string
	body []byte
	dir  bool
	exec bool
}

func layer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, ModTime: created, Uid: 0, Gid: 0, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		switch {
		case f.dir:
			h.Typeflag, h.Mode = tar.TypeDir, 0o555
		case f.exec:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o555, int64(len(f.body))
		default:
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o444, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer entry %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("image: layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// staticLinuxArch returns the GOARCH of a statically linked Linux ELF executable, or an error
// saying why the file is not one.
func staticLinuxArch(name string) (string, error) {
	f, err := elf.Open(name)
	if err != nil {
		return "", fmt.Errorf("image: %s is not an ELF executable: %w", name, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("image: %s is dynamically linked (build it with CGO_ENABLED=0)", name)
		}
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return "", fmt.Errorf("image: %s is not a Linux executable (OS ABI %v)", name, f.OSABI)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "386", nil
	case elf.EM_ARM:
		return "arm", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	}
	return "", fmt.Errorf("image: %s is for machine %v, which this builder does not name", name, f.Machine)
}

// layerPath is the name of a blob inside the layout.
func layerPath(h v1.Hash) string { return path.Join("blobs", h.Algorithm, h.Hex) }
