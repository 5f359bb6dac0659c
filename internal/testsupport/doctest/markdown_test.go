package doctest

import (
	"os"
	"path/filepath"
	"testing"
)

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
