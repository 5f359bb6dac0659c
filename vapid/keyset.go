package vapid

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// MaxSpecName bounds the NAME of a [NAME=]FILE key spec. A raw key is 43 characters or more,
// so one written KEY=... (or KEY= with base64 padding) is never taken for a name, which errors
// print.
const MaxSpecName = 32

// LoadKeySpecs loads the keys of [NAME=]FILE specs (the worker's --vapid-key values), where
// FILE may be the key itself (LoadKeyFile); a bare FILE is the key named "default". Two keys
// of one name are refused.
func LoadKeySpecs(specs []string) (map[string]*Key, error) {
	keys := make(map[string]*Key, len(specs))
	for _, spec := range specs {
		name, file, ok := strings.Cut(spec, "=")
		if !ok || !specName(name) || file == "" || file[0] == '=' || isFile(spec) {
			// No NAME= in front: the whole value is the file (whose path may hold a '=') or the
			// key, whose base64 may end in '=' and whose PEM has spaces. Errors print the name,
			// so it must not be a key.
			name, file = "default", spec
		}
		if _, dup := keys[name]; dup {
			return nil, fmt.Errorf("two keys named %q", name)
		}
		k, err := LoadKeyFile(name, file)
		if err != nil {
			return nil, err
		}
		keys[name] = k
	}
	return keys, nil
}

// isFile reports whether path names a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// specName reports whether s may be the NAME of a NAME=FILE spec: up to MaxSpecName of the
// printable ASCII a job's vapid_key may hold, spaces left out.
func specName(s string) bool {
	if s == "" || len(s) > MaxSpecName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Names are the names of keys, sorted.
func Names(keys map[string]*Key) []string {
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// EndpointHashKey is the key of the endpoint hash in the worker's log lines. It is derived
// from the key that sorts first by name, which every replica holds and no log line reveals, so
// that every replica hashes an endpoint alike with nothing more to configure, and a reader of
// the logs cannot test a guessed endpoint against a hash.
func EndpointHashKey(keys map[string]*Key) ([]byte, error) {
	names := Names(keys)
	if len(names) == 0 {
		return nil, errors.New("no VAPID key")
	}
	pem, err := keys[names[0]].MarshalPEM()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("webpush-gateway endpoint hash\x00"), pem...))
	return sum[:], nil
}
