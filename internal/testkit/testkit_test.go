package testkit

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestClockSetsAndSteps(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	c.Add(90 * time.Second)
	if got, want := c.Now(), t0.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Add, Now = %v, want %v", got, want)
	}
	c.Set(t0.Add(-time.Hour))
	if got, want := c.Now(), t0.Add(-time.Hour); !got.Equal(want) {
		t.Fatalf("after Set, Now = %v, want %v", got, want)
	}
}

func TestBufferTakesConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				fmt.Fprintf(&b, "%d\n", i)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}

// TestKeyEncodingsAreOneKey: every encoding of a Key decodes to its private key.
func TestKeyEncodingsAreOneKey(t *testing.T) {
	k := NewKey(t)
	if len(k.Scalar) != 32 || len(k.Public) != 65 || k.Public[0] != 4 {
		t.Fatalf("scalar of %d bytes, public of %d bytes starting %#x", len(k.Scalar), len(k.Public), k.Public[:1])
	}
	if raw, err := base64.RawURLEncoding.DecodeString(k.Raw()); err != nil || string(raw) != string(k.Scalar) {
		t.Errorf("Raw %q does not decode to the scalar (%v)", k.Raw(), err)
	}
	if pub, err := base64.RawURLEncoding.DecodeString(k.PublicKey()); err != nil || string(pub) != string(k.Public) {
		t.Errorf("PublicKey %q does not decode to the public point (%v)", k.PublicKey(), err)
	}
	for name, text := range map[string]string{"EC PRIVATE KEY": k.SEC1PEM(), "PRIVATE KEY": k.PKCS8PEM()} {
		block, _ := pem.Decode([]byte(text))
		if block == nil || block.Type != name {
			t.Fatalf("%s PEM: %q", name, text)
		}
		var priv any
		var err error
		if name == "EC PRIVATE KEY" {
			priv, err = x509.ParseECPrivateKey(block.Bytes)
		} else {
			priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil || !k.Private.Equal(priv.(*ecdsa.PrivateKey)) {
			t.Errorf("%s PEM is not the key (%v)", name, err)
		}
	}
	if other := NewKey(t); other.Private.Equal(k.Private) {
		t.Error("two new keys are equal")
	}
}

func TestReceiveReturnsTheValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(t, ch, time.Second, "seven"); got != 7 {
		t.Fatalf("Receive = %d, want 7", got)
	}
}

func TestRunReturnsCodeAndOutputs(t *testing.T) {
	main := func(_ context.Context, args []string, stdout, stderr io.Writer) int {
		fmt.Fprint(stdout, strings.Join(args, " "))
		fmt.Fprint(stderr, "warned")
		return 3
	}
	if code, out, errOut := Run(t, main, "a", "b"); code != 3 || out != "a b" || errOut != "warned" {
		t.Fatalf("Run = %d, %q, %q; want 3, \"a b\", \"warned\"", code, out, errOut)
	}
}

func TestMarkdownBlockIsTheFirstBlockOfItsLanguageAfterTheHeading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "## Try it\n\n```yaml\nnot: this\n```\n\n## Try it again\n\nText.\n\n```json\n{}\n```\n\n```sh\necho one\necho two\n```\n\n```sh\necho three\n```\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := MarkdownBlock(t, path, "## Try it again", "sh"); got != "echo one\necho two\n" {
		t.Fatalf("MarkdownBlock = %q, want the first sh block after the heading", got)
	}
	if got := MarkdownBlock(t, path, "## Try it", "yaml"); got != "not: this\n" {
		t.Fatalf("MarkdownBlock = %q, want the yaml block of the first heading", got)
	}
}
