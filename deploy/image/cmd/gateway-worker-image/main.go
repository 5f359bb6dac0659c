// Command gateway-worker-image builds the gateway-worker container image as an OCI tarball
// without a container daemon or registry: `make image` runs it to write
// bin/gateway-worker-image.tar. Load the tarball with `docker load -i`, `podman load -i` or
// `kind load image-archive`, or push it with `crane push FILE REGISTRY/gateway-worker:TAG`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"time"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gateway-worker-image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/gateway-worker-image.tar", "tarball to write")
	ref := flag.String("tag", image.DefaultRef, "name:tag the tarball gives the image")
	binary := flag.String("binary", "", "a static linux gateway-worker to put in the image (default: build ./cmd/gateway-worker of -repo)")
	repo := flag.String("repo", "", "the repository root, whose ./cmd/gateway-worker is built (default: the nearest directory above the working directory with the product's go.mod)")
	arch := flag.String("arch", "", "GOARCH to build for when -binary is not given (default: this machine's)")
	bundle := flag.String("ca-bundle", image.DefaultCABundle, "PEM bundle of CA certificates to put in the image")
	version := flag.String("version", "", "org.opencontainers.image.version label")
	flag.Parse()
	if flag.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	created := time.Unix(0, 0)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		created = time.Unix(sec, 0)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bin := *binary
	if bin == "" {
		dir, err := os.MkdirTemp("", "gateway-worker-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "gateway-worker")
		root := *repo
		if root == "" {
			if root, err = image.RepoRoot("."); err != nil {
				return err
			}
		}
		if err := image.Compile(ctx, root, bin, *arch); err != nil {
			return err
		}
	}
	img, err := image.Build(image.Options{Binary: bin, CABundle: *bundle, Version: *version, Created: created})
	if err != nil {
		return err
	}
	if err := image.WriteFile(*out, img, *ref); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s %s\n", *out, *ref, digest)
	return nil
}
