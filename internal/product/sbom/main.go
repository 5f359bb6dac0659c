// Command sbom writes the software bill of materials of a Go binary as an SPDX 2.3 JSON
// document: the binary (its version, SHA-256 and how it was built), the Go toolchain that built
// it, and every module it links, each with its version and Go package URL. It reads only what
// the go command recorded in the binary (what `go version -m` prints), so it needs no network
// and no source tree. `make release` runs it on each binary it publishes:
//
//	go run ./internal/product/sbom -version v0.1.0 -out gateway-worker.spdx.json dist/gateway-worker-v0.1.0-linux-amd64
//
// The document's creation time is SOURCE_DATE_EPOCH when set, else the commit time the go
// command recorded (vcs.time), else now: the same binary gives the same document.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	out := fs.String("out", "", "file to write (default: standard output)")
	name := fs.String("name", "", "the binary's name in the document (default: the file's base name)")
	version := fs.String("version", "", "the binary's version, as it was stamped (default: the stamp its -ldflags record, else its module version)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one binary, got %d arguments", fs.NArg())
	}
	bin := fs.Arg(0)
	if *name == "" {
		*name = filepath.Base(bin)
	}
	doc, err := fromBinary(bin, *name, *version)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if *out == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o644)
}

// fromBinary reads the build information and the SHA-256 of the binary at path and describes
// it as name at version ("" for the version its build information tells).
func fromBinary(path, name, version string) (*document, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the build information of %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	created, err := creationTime(bi)
	if err != nil {
		return nil, err
	}
	return describe(bi, name, version, hex.EncodeToString(sum[:]), created), nil
}

// creationTime is SOURCE_DATE_EPOCH, else the build's vcs.time, else now.
func creationTime(bi *debug.BuildInfo) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339, setting(bi, "vcs.time")); err == nil {
		return t.UTC(), nil
	}
	return time.Now().UTC().Truncate(time.Second), nil
}

func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// The subset of SPDX 2.3 (https://spdx.github.io/spdx-spec/v2.3/) a binary's bill needs.
type document struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	Name             string        `json:"name"`
	SPDXID           string        `json:"SPDXID"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	CopyrightText    string        `json:"copyrightText"`
	Checksums        []checksum    `json:"checksums,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
	PrimaryPurpose   string        `json:"primaryPackagePurpose,omitempty"`
	Comment          string        `json:"comment,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// mainModule is the product's module: its licence is the repository's LICENSE.
const (
	mainModule  = "github.com/webpush-gateway/webpush-gateway"
	mainLicense = "Apache-2.0"
	mainRepo    = "https://github.com/webpush-gateway/webpush-gateway"
)

// describe is the document for a binary built as bi, named name, whose SHA-256 is sum (hex):
// at version, else the version stamped into it, else its module version.
func describe(bi *debug.BuildInfo, name, version, sum string, created time.Time) *document {
	if version == "" {
		version = stampedVersion(bi)
	}
	if version == "" {
		version = bi.Main.Version
	}
	binID := "SPDXRef-Binary-" + spdxID(name)
	license := "NOASSERTION"
	if bi.Main.Path == mainModule {
		license = mainLicense
	}
	doc := &document{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              name,
		DocumentNamespace: mainRepo + "/spdx/" + name + "-" + sum,
		CreationInfo: creationInfo{
			Created:  created.Format(time.RFC3339),
			Creators: []string{"Tool: webpush-gateway-sbom", "Organization: The webpush-gateway Authors"},
		},
	}
	doc.Packages = append(doc.Packages, pkg{
		Name:             name,
		SPDXID:           binID,
		VersionInfo:      version,
		DownloadLocation: "NOASSERTION",
		LicenseDeclared:  license,
		CopyrightText:    "NOASSERTION",
		Checksums:        []checksum{{Algorithm: "SHA256", Value: sum}},
		ExternalRefs:     purl(bi.Main.Path, version),
		PrimaryPurpose:   "APPLICATION",
		Comment:          "package " + bi.Path + " of module " + bi.Main.Path + "; built with " + buildFlags(bi),
	})
	doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", binID})

	goID := "SPDXRef-Go-" + spdxID(bi.GoVersion)
	doc.Packages = append(doc.Packages, pkg{
		Name:             "go",
		SPDXID:           goID,
		VersionInfo:      bi.GoVersion,
		DownloadLocation: "NOASSERTION",
		LicenseDeclared:  "NOASSERTION",
		CopyrightText:    "NOASSERTION",
		ExternalRefs:     purl("stdlib", bi.GoVersion),
		Comment:          "the Go toolchain and standard library the binary was built with",
	})
	doc.Relationships = append(doc.Relationships, relationship{binID, "DEPENDS_ON", goID})

	for _, m := range bi.Deps {
		path, ver, comment := m.Path, m.Version, ""
		if r := m.Replace; r != nil {
			path, ver = r.Path, r.Version
			comment = "replaces " + m.Path + " " + m.Version
		}
		if m.Sum != "" {
			comment = strings.TrimPrefix(comment+"; ", "; ") + "go.sum " + m.Sum
		}
		id := "SPDXRef-Module-" + spdxID(path+"-"+ver)
		doc.Packages = append(doc.Packages, pkg{
			Name:             path,
			SPDXID:           id,
			VersionInfo:      ver,
			DownloadLocation: "NOASSERTION",
			LicenseDeclared:  "NOASSERTION",
			CopyrightText:    "NOASSERTION",
			ExternalRefs:     purl(path, ver),
			PrimaryPurpose:   "LIBRARY",
			Comment:          comment,
		})
		doc.Relationships = append(doc.Relationships, relationship{binID, "DEPENDS_ON", id})
	}
	return doc
}

// stampedVersion is the version given to the linker with -X ...buildinfo.stamp=, as the build
// settings record it ("" when none): the version the binary reports, which a module version
// of "(devel)" or a pseudo-version would not say. A -trimpath build records no -ldflags: give
// its version with -version.
func stampedVersion(bi *debug.BuildInfo) string {
	const stamp = mainModule + "/internal/product/buildinfo.stamp="
	for _, f := range strings.Fields(setting(bi, "-ldflags")) {
		if v, ok := strings.CutPrefix(strings.TrimPrefix(f, "-X="), stamp); ok {
			return v
		}
	}
	return ""
}

// buildFlags is the build settings as one line: GOOS, GOARCH, CGO_ENABLED, the flags and the
// VCS revision.
func buildFlags(bi *debug.BuildInfo) string {
	var parts []string
	for _, s := range bi.Settings {
		parts = append(parts, s.Key+"="+s.Value)
	}
	return strings.Join(parts, " ")
}

// purl is the Go package URL of module path at version (none for a version the go command
// did not know).
func purl(path, version string) []externalRef {
	if version == "" || version == "(devel)" {
		return nil
	}
	return []externalRef{{Category: "PACKAGE-MANAGER", Type: "purl", Locator: "pkg:golang/" + path + "@" + version}}
}

// spdxID makes s fit an SPDX identifier's alphabet (letters, digits, '.' and '-').
func spdxID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		}
		return '-'
	}, s)
}
