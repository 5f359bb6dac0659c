package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func cmdKeygen(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fset := cli.NewFlagSet("gateway-worker keygen", stderr)
	out := fset.String("out", "vapid.pem", "where to write the private key (PEM, mode 0600); never overwritten")
	if err := cli.ParseFlags(fset, args); err != nil {
		return cli.ExitUsage(err)
	}
	key, err := vapid.GenerateKey("default")
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker keygen:", err)
		return 1
	}
	pem, err := key.MarshalPEM()
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker keygen:", err)
		return 1
	}
	// O_EXCL: a key that subscriptions are bound to must never be replaced by accident.
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(stderr, "gateway-worker keygen: %s exists; subscriptions may be bound to it, so it is not overwritten\n", *out)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker keygen:", err)
		return 1
	}
	if _, err := f.Write(pem); err != nil {
		f.Close()
		fmt.Fprintln(stderr, "gateway-worker keygen:", err)
		return 1
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(stderr, "gateway-worker keygen:", err)
		return 1
	}
	fmt.Fprintf(stderr, "wrote the private key to %s; the public key (applicationServerKey) is:\n", *out)
	fmt.Fprintln(stdout, key.PublicKey())
	return 0
}
