package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
)

// What cosign writes (github.com/sigstore/cosign/v2: pkg/oci/static, pkg/types).
const (
	simpleSigningType   = "application/vnd.dev.cosign.simplesigning.v1+json"
	dsseType            = "application/vnd.dsse.envelope.v1+json"
	signatureAnnotation = "dev.cosignproject.cosign/signature"
	imageSignatureType  = "cosign container image signature"
	inTotoPayloadType   = "application/vnd.in-toto+json"
	spdxPredicateType   = "https://spdx.dev/Document"
)

// Report is what Verify found.
type Report struct {
	Files      int               // files SHA256SUMS lists, each checked
	Repository string            // the repository the image signatures name
	Index      v1.Hash           // the image index's digest
	Platforms  map[string]string // platform: its image's digest
	SBOMs      map[string]string // platform: the name of the binary its attested SBOM describes
}

// Verify checks a release directory against a PEM public key: SHA256SUMS.sig is a signature
// of SHA256SUMS by the key (what `cosign verify-blob --key` checks), every file is listed
// there with its digest and none is missing; in the OCI layout, the image index is for
// Platforms, it and each image carry a signature by the key of a payload naming their digest
// (`cosign verify --key`), and each image an attestation signed by the key whose subject is
// its digest and whose predicate is an SPDX SBOM of the binary in that image (`cosign
// verify-attestation --key --type spdxjson`).
func Verify(dir string, pubPEM []byte) (*Report, error) {
	pub, err := parsePublicKey(pubPEM)
	if err != nil {
		return nil, err
	}
	r := &Report{Platforms: map[string]string{}, SBOMs: map[string]string{}}
	sums, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return nil, err
	}
	sig, err := os.ReadFile(filepath.Join(dir, SumsSigFile))
	if err != nil {
		return nil, err
	}
	if err := verifyBlob(pub, sums, sig); err != nil {
		return nil, fmt.Errorf("%s: %w", SumsSigFile, err)
	}
	if r.Files, err = checkSums(dir, sums); err != nil {
		return nil, err
	}
	layouts, err := filepath.Glob(filepath.Join(dir, "*-oci", "oci-layout"))
	if err != nil || len(layouts) != 1 {
		return nil, fmt.Errorf("want one OCI image layout (*-oci/) in %s, found %v", dir, layouts)
	}
	if err := verifyLayout(filepath.Dir(layouts[0]), pub, r); err != nil {
		return nil, err
	}
	return r, nil
}

// parsePublicKey reads a PEM "PUBLIC KEY" (PKIX) as cosign writes it.
func parsePublicKey(pubPEM []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(pubPEM)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("the public key is not a PEM PUBLIC KEY")
	}
	return x509.ParsePKIXPublicKey(block.Bytes)
}

// verifySignature checks sig over msg as cosign's signers make it: ECDSA and RSA
// (PKCS #1 v1.5) over msg's SHA-256, Ed25519 over msg itself.
func verifySignature(pub crypto.PublicKey, msg, sig []byte) error {
	sum := sha256.Sum256(msg)
	ok := false
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		ok = ecdsa.VerifyASN1(k, sum[:], sig)
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil
	case ed25519.PublicKey:
		ok = ed25519.Verify(k, msg, sig)
	default:
		return fmt.Errorf("a %T key is not one cosign signs with", pub)
	}
	if !ok {
		return errors.New("the signature does not verify with the public key")
	}
	return nil
}

// verifyBlob checks a base64 signature file as `cosign sign-blob` writes it.
func verifyBlob(pub crypto.PublicKey, blob, sigFile []byte) error {
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sigFile)))
	if err != nil {
		return fmt.Errorf("not base64: %w", err)
	}
	return verifySignature(pub, blob, sig)
}

// checkSums checks every line of SHA256SUMS against its file, and that every file of dir (but
// the sums, their signature and the key) has a line.
func checkSums(dir string, sums []byte) (int, error) {
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		want, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(want) != 64 || file == "" || path.IsAbs(file) || path.Clean(file) != file || strings.HasPrefix(file, "../") {
			return 0, fmt.Errorf("%s: bad line %q", SumsFile, sc.Text())
		}
		if listed[file] {
			return 0, fmt.Errorf("%s lists %s twice", SumsFile, file)
		}
		listed[file] = true
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil {
			return 0, err
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
			return 0, fmt.Errorf("%s: SHA-256 %x, %s says %s", file, got, SumsFile, want)
		}
	}
	all, err := Sums(dir)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(all)) {
		if file := strings.TrimSpace(line[66:]); !listed[file] {
			return 0, fmt.Errorf("%s is not in %s", file, SumsFile)
		}
	}
	return len(listed), nil
}

// verifyLayout checks the layout's index, signatures and attestations (see Verify).
func verifyLayout(dir string, pub crypto.PublicKey, r *Report) error {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	root, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	rm, err := root.IndexManifest()
	if err != nil {
		return err
	}
	byTag := map[string]v1.Descriptor{}
	var release []v1.Descriptor
	for _, d := range rm.Manifests {
		tag := d.Annotations[image.RefNameAnnotation]
		byTag[tag] = d
		if !strings.HasPrefix(tag, "sha256-") {
			release = append(release, d)
		}
	}
	if len(release) != 1 || !release[0].MediaType.IsIndex() {
		return fmt.Errorf("the layout holds %d tagged manifests besides signatures, want one image index", len(release))
	}
	idx, err := root.ImageIndex(release[0].Digest)
	if err != nil {
		return err
	}
	r.Index = release[0].Digest
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return fmt.Errorf("image %s has no platform in the index", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
	}
	if !slices.Equal(platforms, Platforms) {
		return fmt.Errorf("the index is for %v, want %v", platforms, Platforms)
	}
	sigImage := func(d v1.Hash, suffix string) (v1.Image, error) {
		tag := "sha256-" + d.Hex + suffix
		desc, ok := byTag[tag]
		if !ok {
			return nil, fmt.Errorf("no %s for %s in the layout", tag, d)
		}
		return root.Image(desc.Digest)
	}
	// Signatures of the index and of each image.
	for _, d := range append([]v1.Hash{r.Index}, digests(im.Manifests)...) {
		img, err := sigImage(d, ".sig")
		if err != nil {
			return err
		}
		repo, err := verifyImageSignature(img, d, pub)
		if err != nil {
			return fmt.Errorf("signature of %s: %w", d, err)
		}
		if r.Repository != "" && repo != r.Repository {
			return fmt.Errorf("signature of %s names %s, another names %s", d, repo, r.Repository)
		}
		r.Repository = repo
	}
	// The SBOM attestation of each image.
	for _, d := range im.Manifests {
		img, err := sigImage(d.Digest, ".att")
		if err != nil {
			return err
		}
		platformImg, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		bin, err := binaryOf(platformImg)
		if err != nil {
			return err
		}
		described, err := verifyAttestation(img, d.Digest, pub, bin)
		if err != nil {
			return fmt.Errorf("attestation of %s (%s): %w", d.Digest, d.Platform, err)
		}
		r.Platforms[d.Platform.String()] = d.Digest.String()
		r.SBOMs[d.Platform.String()] = described
	}
	return nil
}

func digests(ds []v1.Descriptor) []v1.Hash {
	var out []v1.Hash
	for _, d := range ds {
		out = append(out, d.Digest)
	}
	return out
}

// verifyImageSignature checks a cosign signature image: one of its simple-signing payloads
// names digest and is signed by pub. It returns the repository the payload names.
func verifyImageSignature(sigImg v1.Image, digest v1.Hash, pub crypto.PublicKey) (string, error) {
	m, err := sigImg.Manifest()
	if err != nil {
		return "", err
	}
	var errs []error
	for _, l := range m.Layers {
		if l.MediaType != simpleSigningType {
			continue
		}
		payload, err := blob(sigImg, l.Digest)
		if err != nil {
			return "", err
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[signatureAnnotation])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := verifySignature(pub, payload, sig); err != nil {
			errs = append(errs, err)
			continue
		}
		var p struct {
			Critical struct {
				Identity struct {
					DockerReference string `json:"docker-reference"`
				} `json:"identity"`
				Image struct {
					DockerManifestDigest string `json:"docker-manifest-digest"`
				} `json:"image"`
				Type string `json:"type"`
			} `json:"critical"`
		}
		if err := json.Unmarshal(payload, &p); err != nil {
			errs = append(errs, err)
			continue
		}
		if p.Critical.Type != imageSignatureType || p.Critical.Image.DockerManifestDigest != digest.String() {
			errs = append(errs, fmt.Errorf("the signed payload is a %q of %s", p.Critical.Type, p.Critical.Image.DockerManifestDigest))
			continue
		}
		return p.Critical.Identity.DockerReference, nil
	}
	if len(errs) == 0 {
		return "", errors.New("no simple-signing payload")
	}
	return "", errors.Join(errs...)
}

// verifyAttestation checks a cosign attestation image: one of its DSSE envelopes is signed by
// pub, its in-toto statement's subject is digest, and its predicate is an SPDX document whose
// application package is the binary whose SHA-256 is binSum. It returns that package's name.
func verifyAttestation(attImg v1.Image, digest v1.Hash, pub crypto.PublicKey, binSum string) (string, error) {
	m, err := attImg.Manifest()
	if err != nil {
		return "", err
	}
	var errs []error
	for _, l := range m.Layers {
		if l.MediaType != dsseType {
			continue
		}
		raw, err := blob(attImg, l.Digest)
		if err != nil {
			return "", err
		}
		name, err := checkEnvelope(raw, digest, pub, binSum)
		if err == nil {
			return name, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return "", errors.New("no DSSE envelope")
	}
	return "", errors.Join(errs...)
}

func checkEnvelope(raw []byte, digest v1.Hash, pub crypto.PublicKey, binSum string) (string, error) {
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			Sig string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return "", err
	}
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return "", err
	}
	// DSSE's pre-authentication encoding is what is signed.
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(env.PayloadType), env.PayloadType, len(body), body)
	verified := false
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err == nil && verifySignature(pub, pae, sig) == nil {
			verified = true
		}
	}
	if !verified || env.PayloadType != inTotoPayloadType {
		return "", fmt.Errorf("no signature of the %s envelope verifies with the public key", env.PayloadType)
	}
	var st struct {
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			SPDXVersion string `json:"spdxVersion"`
			Packages    []struct {
				Name      string `json:"name"`
				Purpose   string `json:"primaryPackagePurpose"`
				Checksums []struct {
					Algorithm string `json:"algorithm"`
					Value     string `json:"checksumValue"`
				} `json:"checksums"`
			} `json:"packages"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return "", err
	}
	if st.PredicateType != spdxPredicateType || !strings.HasPrefix(st.Predicate.SPDXVersion, "SPDX-2.") {
		return "", fmt.Errorf("predicate %s %s, want an SPDX 2 document", st.PredicateType, st.Predicate.SPDXVersion)
	}
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != digest.Hex {
		return "", fmt.Errorf("the statement's subject %v is not %s", st.Subject, digest)
	}
	for _, p := range st.Predicate.Packages {
		for _, c := range p.Checksums {
			if p.Purpose == "APPLICATION" && c.Algorithm == "SHA256" && c.Value == binSum {
				return p.Name, nil
			}
		}
	}
	return "", fmt.Errorf("the SBOM describes no application with the SHA-256 %s of the image's %s", binSum, image.BinaryPath)
}

// blob reads a layer of img by digest.
func blob(img v1.Image, d v1.Hash) ([]byte, error) {
	l, err := img.LayerByDigest(d)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// binaryOf is the hex SHA-256 of the worker binary in an image's file system.
func binaryOf(img v1.Image) (string, error) {
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return "", err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				rc.Close()
				if err == io.EOF {
					break
				}
				return "", err
			}
			if h.Name == strings.TrimPrefix(image.BinaryPath, "/") {
				hash := sha256.New()
				_, err := io.Copy(hash, tr)
				rc.Close()
				return hex.EncodeToString(hash.Sum(nil)), err
			}
		}
	}
	return "", fmt.Errorf("the image has no %s", image.BinaryPath)
}
