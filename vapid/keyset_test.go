package vapid_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// writeKey writes a new key's PEM to dir/file and returns its path and the key.
func writeKey(t *testing.T, dir, file string) (string, *vapid.Key) {
	t.Helper()
	k, err := vapid.GenerateKey("default")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := k.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, k
}

// A key file whose path holds a '=' is a file, not NAME=FILE; NAME=FILE still names a key.
func TestKeySpecFileWithAnEqualsSignInItsPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x=y")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file, _ := writeKey(t, dir, "vapid.pem")
	keys, err := vapid.LoadKeySpecs([]string{file, "legacy=" + file})
	if err != nil {
		t.Fatalf("LoadKeySpecs: %v", err)
	}
	if keys["default"] == nil || keys["legacy"] == nil || len(keys) != 2 {
		t.Fatalf("keys %v, want default (the path with '=') and legacy", keys)
	}
}

// A raw key given as the value is the key named "default", padding and all, and an error
// about it never prints it as a name; two keys of one name are refused.
func TestKeySpecs(t *testing.T) {
	dir := t.TempDir()
	file, k := writeKey(t, dir, "a.pem")
	raw, err := k.MarshalRaw()
	if err != nil {
		t.Fatal(err)
	}
	keys, err := vapid.LoadKeySpecs([]string{raw, "b=" + file})
	if err != nil || keys["default"] == nil || keys["b"] == nil || keys["default"].PublicKey() != k.PublicKey() {
		t.Fatalf("LoadKeySpecs(raw, b=FILE): %v, %v", keys, err)
	}
	if _, err := vapid.LoadKeySpecs([]string{file, "default=" + file}); err == nil || !strings.Contains(err.Error(), `two keys named "default"`) {
		t.Errorf("two keys named default: %v", err)
	}
	bad := raw[:len(raw)-2] + "=x"
	_, err = vapid.LoadKeySpecs([]string{bad})
	if err == nil || strings.Contains(err.Error(), raw[:10]) {
		t.Errorf("a bad raw key: %v; want an error that does not quote it", err)
	}
	long := strings.Repeat("n", vapid.MaxSpecName+1) + "=" + file
	if _, err := vapid.LoadKeySpecs([]string{long}); err == nil {
		t.Errorf("a NAME longer than %d is taken for a name", vapid.MaxSpecName)
	}
}

// The endpoint hash key is the same for the same keys whatever their order, follows the key
// that sorts first, and needs a key.
func TestEndpointHashKey(t *testing.T) {
	dir := t.TempDir()
	a, _ := writeKey(t, dir, "a.pem")
	b, _ := writeKey(t, dir, "b.pem")
	load := func(specs ...string) map[string]*vapid.Key {
		keys, err := vapid.LoadKeySpecs(specs)
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	h1, err := vapid.EndpointHashKey(load("x="+a, "y="+b))
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := vapid.EndpointHashKey(load("y="+b, "x="+a))
	h3, _ := vapid.EndpointHashKey(load("x="+b, "y="+a))
	if len(h1) != 32 || !bytes.Equal(h1, h2) || bytes.Equal(h1, h3) {
		t.Errorf("hash keys %x %x %x: want 32 bytes, the first two equal, the third not", h1, h2, h3)
	}
	if got := vapid.Names(load("y="+b, "x="+a)); len(got) != 2 || got[0] != "x" || got[1] != "y" {
		t.Errorf("Names = %v, want [x y]", got)
	}
	if _, err := vapid.EndpointHashKey(nil); err == nil {
		t.Error("EndpointHashKey of no key: no error")
	}
}
