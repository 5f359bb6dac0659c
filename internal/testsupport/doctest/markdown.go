package doctest

import (
	"os"
	"strings"
	"testing"
)

// MarkdownBlock is the first fenced block of language lang (```lang) after the line heading
// in the Markdown file path: the examples of the docs that tests run or load as users would.
func MarkdownBlock(t testing.TB, path, heading, lang string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut("\n"+string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no line %q", path, heading)
	}
	_, rest, ok = strings.Cut(rest, "```"+lang+"\n")
	if !ok {
		t.Fatalf("%s has no %s block after %q", path, lang, heading)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("the %s block after %q in %s does not end", lang, heading, path)
	}
	return block
}
