package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A key file whose path holds a '=' is a file, not NAME=FILE; NAME=FILE still names a key.
func TestVAPIDKeyFileWithAnEqualsSignInItsPath(t *testing.T) {
	pem, err := os.ReadFile("testdata/vapid.pem")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "x=y")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "vapid.pem")
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := loadVAPIDKeys([]string{file, "legacy=" + file})
	if err != nil {
		t.Fatalf("loadVAPIDKeys: %v", err)
	}
	if keys["default"] == nil || keys["legacy"] == nil || len(keys) != 2 {
		t.Fatalf("keys %v, want default (the path with '=') and legacy", keys)
	}
}
