package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// keyPair is what `keygen --json` prints, in the shape of `web-push generate-vapid-keys --json`
// (Node): the public key and the raw private scalar, both base64url without padding.
type keyPair struct {
	PublicKey  string `json:"publicKey"`
	PrivateKey string `json:"privateKey,omitempty"`
}

func cmdKeygen(_ context.Context, fset *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	fset.Group("Key")
	out := fset.String("out", "vapid.pem", "`FILE` to write the private key to (PEM, mode 0600); an existing file is refused")
	force := fset.Bool("force", false, "replace an existing --out file (subscriptions made with its key stop working)")
	public := fset.String("public", "", "print the public key of the private key in `FILE` (PEM or raw) and make none")
	fset.Group("Output")
	asJSON := fset.Bool("json", false, "print {\"publicKey\",\"privateKey\"} as JSON (with --public, only publicKey)")
	if code, ok := fset.Parse(args); !ok {
		return code
	}
	name := fset.Name()
	if *public != "" {
		if fset.IsSet("out") || *force {
			return fset.Fail(errors.New("--public reads a key; it takes no --out or --force"))
		}
		key, err := loadKeyFile(*public)
		if err != nil {
			return failure(stderr, name, cli.ExitNo, fmt.Errorf("--public: %w", err))
		}
		return printKey(stdout, stderr, name, keyPair{PublicKey: key.PublicKey()}, *asJSON)
	}
	key, err := vapid.GenerateKey("default")
	if err != nil {
		return failure(stderr, name, cli.ExitNo, err)
	}
	pemBytes, err := key.MarshalPEM()
	if err != nil {
		return failure(stderr, name, cli.ExitNo, err)
	}
	pair := keyPair{PublicKey: key.PublicKey()}
	if *asJSON {
		if pair.PrivateKey, err = key.MarshalRaw(); err != nil {
			return failure(stderr, name, cli.ExitNo, err)
		}
	}
	if !*asJSON || fset.IsSet("out") {
		if err := writeKeyFile(*out, pemBytes, *force); err != nil {
			return failure(stderr, name, cli.ExitNo, err)
		}
		if !*asJSON {
			fmt.Fprintf(stderr, "wrote the private key to %s; the public key (applicationServerKey) is:\n", *out)
		}
	}
	return printKey(stdout, stderr, name, pair, *asJSON)
}

func printKey(stdout, stderr io.Writer, name string, pair keyPair, asJSON bool) int {
	var err error
	if asJSON {
		err = json.NewEncoder(stdout).Encode(pair)
	} else {
		_, err = fmt.Fprintln(stdout, pair.PublicKey)
	}
	if err != nil {
		return failure(stderr, name, cli.ExitNo, err)
	}
	return cli.ExitOK
}

// loadKeyFile loads the key in the file at path, which must be a file: unlike --vapid-key,
// --public never takes the key itself, so a key given there by mistake is refused, unquoted.
func loadKeyFile(path string) (*vapid.Key, error) {
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("not a readable key file (give the path of a PEM or raw key file)")
	}
	return vapid.LoadKeyFile("default", path)
}

// writeKeyFile writes a new private key file, mode 0600, refusing to replace one unless force:
// subscriptions are bound to the key a file holds.
func writeKeyFile(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; subscriptions may be bound to its key, so it is not replaced (--force replaces it; --public %s prints its public key)", path, path)
	}
	if err != nil {
		return err
	}
	if force {
		// O_TRUNC keeps the mode of a file that existed: make it the key file's.
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
