// Command gateway-worker-release makes, checks and publishes a gateway release (package
// release). `make release` runs `make`; anyone can run `verify` on a downloaded release:
//
//	gateway-worker-release make -dir dist -version v0.1.0 -chart helm/webpush-gateway \
//	    dist/gateway-worker-v0.1.0-linux-amd64 dist/gateway-worker-v0.1.0-linux-arm64
//	gateway-worker-release verify -key dist/cosign.pub dist
//	gateway-worker-release push dist/gateway-worker-v0.1.0-oci ghcr.io/webpush-gateway/gateway-worker
//
// make signs with the key COSIGN_KEY names (a cosign key file, env://VARIABLE or a KMS URI;
// COSIGN_PASSWORD unlocks it), or with a key pair made for the run when COSIGN_KEY is unset.
// Each binary's SBOM is the binary's name plus .spdx.json, beside it. push authenticates as
// `docker login` or `crane auth login` left it (~/.docker/config.json).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/webpush-gateway/webpush-gateway/deploy/release"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gateway-worker-release make|verify|push ...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "make":
		err = makeRelease(ctx, os.Args[2:])
	case "verify":
		err = verify(os.Args[2:])
	case "push":
		err = push(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: make, verify or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway-worker-release:", err)
		os.Exit(1)
	}
}

func makeRelease(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("make", flag.ExitOnError)
	dir := fs.String("dir", "dist", "the release directory, which holds the binaries and their SBOMs")
	version := fs.String("version", "", "the release, the image's tag (vX.Y.Z)")
	chart := fs.String("chart", "helm/webpush-gateway", "the Helm chart to package")
	repo := fs.String("repository", release.DefaultRepository, "the image's repository")
	cosign := fs.String("cosign", "", "a cosign executable (default: go run "+release.CosignPackage+")")
	fs.Parse(args)
	if *version == "" || fs.NArg() != len(release.Platforms) {
		return fmt.Errorf("make: want -version and one binary per platform %v", release.Platforms)
	}
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		created = time.Unix(sec, 0)
	}
	o := release.Options{Dir: *dir, Version: *version, Repository: *repo, Chart: *chart, Created: created, Log: os.Stdout}
	for _, b := range fs.Args() {
		o.Binaries = append(o.Binaries, b)
		o.SBOMs = append(o.SBOMs, b+".spdx.json")
	}
	if *cosign != "" {
		o.Cosign = strings.Fields(*cosign)
	}
	return release.Make(ctx, o)
}

func verify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	key := fs.String("key", "", "the release's public key (default: cosign.pub in the directory; take it from where you trust, not from the download)")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("verify: want the release directory")
	}
	if *key == "" {
		*key = fs.Arg(0) + "/" + release.PublicKeyFile
	}
	pub, err := os.ReadFile(*key)
	if err != nil {
		return err
	}
	r, err := release.Verify(fs.Arg(0), pub)
	if err != nil {
		return err
	}
	fmt.Printf("%s: signed by %s, %d files as SHA256SUMS lists them\n", release.SumsFile, *key, r.Files)
	fmt.Printf("image index %s@%s, signed\n", r.Repository, r.Index)
	platforms := make([]string, 0, len(r.Platforms))
	for p := range r.Platforms {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	for _, p := range platforms {
		fmt.Printf("  %s %s, signed, SPDX SBOM of %s attested\n", p, r.Platforms[p], r.SBOMs[p])
	}
	return nil
}

func push(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("push: want the layout directory and the repository")
	}
	return release.Push(args[0], args[1], os.Stdout, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithContext(ctx))
}
