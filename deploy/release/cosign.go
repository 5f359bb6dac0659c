package release

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// CosignPackage is the cosign the release signs with, from the Go module proxy. `go run`
// builds it once and keeps the executable in the Go build cache.
const CosignPackage = "github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5"

// The environment that gives the release its signing key: KeyEnv is a key reference cosign
// reads (the path of a cosign.key, env://VARIABLE, or a KMS URI such as awskms://...), and
// PasswordEnv the password of an encrypted key. Without KeyEnv a key pair is made for the run
// and its private half removed at the end: the release then verifies only with the
// cosign.pub it ships.
const (
	KeyEnv      = "COSIGN_KEY"
	PasswordEnv = "COSIGN_PASSWORD"
)

// cosign runs the pinned cosign (or Command, when set) with a key.
type cosign struct {
	// Command is the cosign to run: an executable and its first arguments; empty runs
	// CosignPackage with `go run`.
	command []string
	key     string   // the key reference
	env     []string // the environment of every run
}

// run runs cosign with args, with env (VAR=value) added to its environment and the proxy
// variables it does not set removed. With `go run`, only cosign gets env, through -exec env:
// the go command itself still reaches the module proxy as configured.
func (c *cosign) run(ctx context.Context, env []string, args ...string) ([]byte, error) {
	base := c.env
	if len(env) > 0 {
		for _, v := range proxyVars {
			base = withoutVar(base, v)
		}
	}
	var argv []string
	if len(c.command) > 0 {
		argv = append(slices.Clone(c.command), args...)
		base = append(slices.Clone(base), env...)
	} else {
		argv = []string{"go", "run"}
		if len(env) > 0 {
			ex := []string{"env"}
			for _, v := range proxyVars {
				ex = append(ex, "-u", v)
			}
			argv = append(argv, "-exec", strings.Join(append(ex, env...), " "))
			base = c.env
		}
		argv = append(append(argv, CosignPackage), args...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = base
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cosign %s: %w\n%s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// newCosign resolves the signing key: the environment's KeyEnv, or a key pair made in dir for
// the run. It returns the PEM public key too.
func newCosign(ctx context.Context, command []string, dir string) (*cosign, []byte, error) {
	c := &cosign{command: command, env: os.Environ()}
	if ref := os.Getenv(KeyEnv); ref != "" {
		c.key = ref
		pub, err := c.run(ctx, nil, "public-key", "--key", ref)
		if err != nil {
			return nil, nil, err
		}
		return c, pub, nil
	}
	// A password no one needs to know: the key lives only for this run.
	pw := make([]byte, 16)
	if _, err := rand.Read(pw); err != nil {
		return nil, nil, err
	}
	c.env = append(withoutVar(c.env, PasswordEnv), PasswordEnv+"="+hex.EncodeToString(pw))
	prefix := filepath.Join(dir, "cosign")
	if _, err := c.run(ctx, nil, "generate-key-pair", "--output-key-prefix", prefix); err != nil {
		return nil, nil, err
	}
	c.key = prefix + ".key"
	pub, err := os.ReadFile(prefix + ".pub")
	if err != nil {
		return nil, nil, err
	}
	return c, pub, nil
}

// signBlob writes the signature of file (base64, as `cosign sign-blob` writes it) to sig.
// Nothing goes to a transparency log: the signature is checked against the published key.
func (c *cosign) signBlob(ctx context.Context, file, sig string) error {
	_, err := c.run(ctx, nil, "sign-blob", "--key", c.key, "--tlog-upload=false", "--yes", "--output-signature", sig, file)
	return err
}

// signImage signs ref (an image index by digest) and every manifest it lists, storing the
// signatures in the registry beside it (the sha256-<digest>.sig tags), as `cosign sign` does.
func (c *cosign) signImage(ctx context.Context, env []string, ref string) error {
	_, err := c.run(ctx, env, "sign", "--key", c.key, "--tlog-upload=false", "--yes", "--recursive", ref)
	return err
}

// attestSBOM attaches an SPDX SBOM to ref (an image by digest) as a signed in-toto
// attestation (the sha256-<digest>.att tag).
func (c *cosign) attestSBOM(ctx context.Context, env []string, ref, sbom string) error {
	_, err := c.run(ctx, env, "attest", "--key", c.key, "--tlog-upload=false", "--yes", "--type", "spdxjson", "--predicate", sbom, ref)
	return err
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
