package vapid

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Key is a named VAPID application server key (ECDSA P-256).
//
// A Key is immutable after it is made and safe for concurrent use. It never
// prints its private half: String, GoString and Format show only the name and
// the public key, for every fmt verb. The private key sits behind a pointer so
// that even a raw field dump (a Key inside an unexported struct field, where
// fmt cannot call methods) shows an address, not the scalar.
type Key struct {
	name   string
	priv   *ecdsa.PrivateKey
	public string // base64url, no padding, of the 65-byte uncompressed point
	id     string // cache identity: name, NUL, public
}

// GenerateKey makes a new random P-256 key.
func GenerateKey(name string) (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: generate: %v", ErrBadKey, name, err)
	}
	return newKey(name, priv)
}

// ParseKey reads a P-256 private key in any of the forms operators have:
//
//   - PEM "EC PRIVATE KEY" (SEC1, what `openssl ecparam -genkey` writes; a
//     leading "EC PARAMETERS" block is skipped),
//   - PEM "PRIVATE KEY" (PKCS#8, what MarshalPEM and `openssl genpkey` write),
//   - the raw 32-byte private scalar in base64, as printed by
//     `web-push generate-vapid-keys` (Node) and webpush-go's
//     GenerateVAPIDKeys: base64url or standard alphabet, padded or not,
//     surrounding whitespace ignored.
//
// Other curves, RSA, Ed25519, encrypted and public-only keys are refused with
// ErrBadKey and a reason. The error never quotes the input.
func ParseKey(name string, data []byte) (*Key, error) {
	priv, reason := parsePrivate(data)
	if reason != "" {
		return nil, fmt.Errorf("%w: %q: %s", ErrBadKey, name, reason)
	}
	return newKey(name, priv)
}

// maxKeyFile bounds what LoadKeyFile reads of a file: a PEM key is a few hundred bytes, and a
// path that names a device or a log must not be read to its end.
const maxKeyFile = 64 << 10

// keyForms is the hint every LoadKeyFile error that found no key ends with.
const keyForms = "want the path of a PEM key file, or the raw 32-byte private key in base64url as web-push generate-vapid-keys prints it"

// LoadKeyFile loads the key named name from value: the path of a key file in any form ParseKey
// accepts or, when value is no readable file, the key itself in any of those forms (a command
// line or an environment variable may carry either).
//
// value may be the key, so no error quotes it, nor any part of it, path included: an error
// names the key (name), says what was wrong with the file or with value as a key, and wraps
// ErrBadKey. One that did not read a file also wraps the cause (match fs.ErrNotExist,
// fs.ErrPermission).
//
// It does not check the file's permissions: deployments mount secrets in many
// ways and a warning nobody reads helps no one. The keygen command writes new
// key files with mode 0600; keep them that way.
func LoadKeyFile(name, value string) (*Key, error) {
	data, readErr := readKeyFile(value)
	if readErr == nil {
		priv, reason := parsePrivate(data)
		if reason != "" {
			return nil, fmt.Errorf("%w: %q: the file holds no usable key: %s", ErrBadKey, name, reason)
		}
		return newKey(name, priv)
	}
	priv, reason := parsePrivate([]byte(value))
	if reason != "" {
		return nil, fmt.Errorf("%w: %q: not a readable file (%w) nor a valid raw key (%s); %s", ErrBadKey, name, readErr, reason, keyForms)
	}
	return newKey(name, priv)
}

// readKeyFile reads at most maxKeyFile bytes of the file at path. Its errors are the causes
// alone ("no such file or directory"): an *fs.PathError would quote path, which may be a key.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, causeOf(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	switch {
	case err != nil:
		return nil, causeOf(err)
	case len(data) > maxKeyFile:
		return nil, errKeyFileTooLarge
	}
	return data, nil
}

var (
	errKeyFileTooLarge = fmt.Errorf("larger than %d bytes", maxKeyFile)
	errUnreadable      = errors.New("cannot be read")
)

// causeOf is the error an *fs.PathError wraps, without the path; any other error is
// errUnreadable, since its text may quote the path.
func causeOf(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil {
		return pe.Err
	}
	return errUnreadable
}

func newKey(name string, priv *ecdsa.PrivateKey) (*Key, error) {
	pub, err := priv.PublicKey.Bytes()
	if err != nil {
		return nil, fmt.Errorf("%w: %q: public key: %v", ErrBadKey, name, err)
	}
	public := base64.RawURLEncoding.EncodeToString(pub)
	return &Key{name: name, priv: priv, public: public, id: name + "\x00" + public}, nil
}

// Name is the key's configured name (used in logs and metrics).
func (k *Key) Name() string { return k.name }

// PublicKey is the base64url (no padding) uncompressed public point: the
// applicationServerKey browsers subscribe with and the k= of the header.
func (k *Key) PublicKey() string { return k.public }

// MarshalPEM encodes the private key as a PKCS#8 "PRIVATE KEY" PEM block.
func (k *Key) MarshalPEM() ([]byte, error) {
	if k == nil || k.priv == nil {
		return nil, fmt.Errorf("%w: nil key", ErrBadKey)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: marshal PKCS#8: %v", ErrBadKey, k.name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// MarshalRaw encodes the private key as its 32-byte scalar in base64url without padding: the
// raw form web-push prints and ParseKey reads.
func (k *Key) MarshalRaw() (string, error) {
	if k == nil || k.priv == nil {
		return "", fmt.Errorf("%w: nil key", ErrBadKey)
	}
	d, err := k.priv.Bytes()
	if err != nil {
		return "", fmt.Errorf("%w: %q: private scalar: %v", ErrBadKey, k.name, err)
	}
	return base64.RawURLEncoding.EncodeToString(d), nil
}

// String shows the name and public key only.
func (k Key) String() string {
	return fmt.Sprintf("vapid.Key{name: %q, public: %q}", k.name, k.public)
}

// GoString is String: %#v must not dump the private scalar either.
func (k Key) GoString() string { return k.String() }

// Format makes every verb (%v, %+v, %#v, %s, %q, %x, %d ...) print String,
// so no formatting path reaches the private key.
func (k Key) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprintf(f, "%q", k.String())
		return
	}
	_, _ = io.WriteString(f, k.String())
}

// parsePrivate returns the key or a reason it was refused. Reasons describe
// the input's shape (format, curve, length), never its bytes.
func parsePrivate(data []byte) (*ecdsa.PrivateKey, string) {
	text := strings.TrimSpace(string(data))
	switch {
	case text == "":
		return nil, "empty key"
	case strings.Contains(text, "-----BEGIN"):
		return parsePEM([]byte(text))
	default:
		return parseRaw(text)
	}
}

func parsePEM(data []byte) (*ecdsa.PrivateKey, string) {
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, "no private key PEM block found (want \"EC PRIVATE KEY\" or \"PRIVATE KEY\")"
		}
		if _, legacy := block.Headers["Proc-Type"]; legacy {
			return nil, fmt.Sprintf("PEM block %s is encrypted; decrypt it first (openssl pkcs8 -nocrypt)", pemType(block.Type))
		}
		switch block.Type {
		case "EC PARAMETERS":
			// `openssl ecparam -genkey` writes the curve before the key.
			continue
		case "EC PRIVATE KEY":
			// x509's error is left out: it describes DER the key is made of.
			priv, err := x509.ParseECPrivateKey(block.Bytes)
			if err != nil {
				return nil, "\"EC PRIVATE KEY\" block is not a SEC1 key (its content does not parse)"
			}
			return checkCurve(priv, "SEC1")
		case "PRIVATE KEY":
			parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, "\"PRIVATE KEY\" block is not a PKCS#8 key (its content does not parse)"
			}
			switch priv := parsed.(type) {
			case *ecdsa.PrivateKey:
				return checkCurve(priv, "PKCS#8")
			case *rsa.PrivateKey:
				return nil, "PKCS#8 key is RSA; VAPID needs an ECDSA P-256 key"
			case ed25519.PrivateKey:
				return nil, "PKCS#8 key is Ed25519; VAPID needs an ECDSA P-256 key"
			case *ecdh.PrivateKey:
				return nil, "PKCS#8 key is X25519; VAPID needs an ECDSA P-256 key"
			default:
				return nil, fmt.Sprintf("PKCS#8 key is %T; VAPID needs an ECDSA P-256 key", parsed)
			}
		case "RSA PRIVATE KEY":
			return nil, "PEM block is an RSA key; VAPID needs an ECDSA P-256 key"
		case "ENCRYPTED PRIVATE KEY":
			return nil, "PEM block is an encrypted PKCS#8 key; decrypt it first (openssl pkcs8 -nocrypt)"
		case "PUBLIC KEY", "EC PUBLIC KEY":
			return nil, "PEM block is a public key; signing needs the private key"
		default:
			return nil, fmt.Sprintf("PEM block %s is not a private key (want \"EC PRIVATE KEY\" or \"PRIVATE KEY\")", pemType(block.Type))
		}
	}
}

// pemType quotes a PEM block's type for a reason when it reads like one ("CERTIFICATE"); any
// other text between the dashes could be anything, a key included, and is not repeated.
func pemType(t string) string {
	if len(t) == 0 || len(t) > 40 {
		return "of an unknown type"
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !(c >= 'A' && c <= 'Z' || c == ' ' || c == '#' || c >= '0' && c <= '9') {
			return "of an unknown type"
		}
	}
	return strconv.Quote(t)
}

func checkCurve(priv *ecdsa.PrivateKey, form string) (*ecdsa.PrivateKey, string) {
	if priv.Curve != elliptic.P256() {
		return nil, fmt.Sprintf("%s key is on curve %s; VAPID needs P-256", form, priv.Curve.Params().Name)
	}
	return priv, ""
}

// parseRaw decodes the 32-byte private scalar. Tools disagree on alphabet and
// padding (web-push prints base64url without padding, some configs hold
// standard base64 with '='), so both are folded into unpadded base64url.
func parseRaw(text string) (*ecdsa.PrivateKey, string) {
	text = strings.TrimRight(text, "=")
	text = strings.NewReplacer("+", "-", "/", "_").Replace(text)
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		// CorruptInputError names an offset, not the data.
		return nil, fmt.Sprintf("not PEM and not a base64 private key: %v", err)
	}
	switch {
	case len(raw) == 65 && raw[0] == 4:
		return nil, "this is a 65-byte uncompressed public key; signing needs the 32-byte private key"
	case len(raw) != 32:
		return nil, fmt.Sprintf("base64 decodes to %d bytes; a raw P-256 private key is 32", len(raw))
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), raw)
	if err != nil {
		return nil, "32 bytes but not a valid P-256 private scalar (zero or not below the group order)"
	}
	return priv, ""
}

// errNilKey is returned by Signer.Header for a nil *Key.
var errNilKey = fmt.Errorf("%w: nil key", ErrBadKey)
