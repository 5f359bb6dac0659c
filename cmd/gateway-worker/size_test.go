package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A command file parses flags, wires packages and prints; logic past that belongs to the
// package it serves. These bounds make a command that grows its own logic fail here rather
// than go unnoticed.
const (
	maxCommandFileLines = 350
	maxCommandLines     = 2500
)

// TestCommandFilesStaySmall fails naming each non-test .go file of this folder over
// maxCommandFileLines lines, and when all of them together are over maxCommandLines.
func TestCommandFilesStaySmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	total, counted := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
		if n > maxCommandFileLines {
			t.Errorf("%s has %d lines, at most %d: move its logic into the package it belongs to", f, n, maxCommandFileLines)
		}
		total += n
		counted++
	}
	if counted == 0 {
		t.Fatal("no non-test .go files found: not run in the command's folder")
	}
	if total > maxCommandLines {
		t.Errorf("the command's %d non-test .go files have %d lines together, at most %d", counted, total, maxCommandLines)
	}
}
