package adapter

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAnswer: readAnswer reads what io.ReadAll(io.LimitReader(body, maxResponseBody))
// reads, and fails as it does, whatever the buffer it is given held before.
func TestReadAnswer(t *testing.T) {
	broken := errors.New("stream reset")
	bodies := map[string]func() io.Reader{
		"empty":         func() io.Reader { return strings.NewReader("") },
		"a line":        func() io.Reader { return strings.NewReader(`{"error":{"status":"NOT_FOUND"}}`) },
		"512 bytes":     func() io.Reader { return strings.NewReader(strings.Repeat("a", 512)) },
		"513 bytes":     func() io.Reader { return strings.NewReader(strings.Repeat("b", 513)) },
		"at the cap":    func() io.Reader { return strings.NewReader(strings.Repeat("c", maxResponseBody)) },
		"over the cap":  func() io.Reader { return strings.NewReader(strings.Repeat("d", 3*maxResponseBody)) },
		"byte by byte":  func() io.Reader { return iotest.OneByteReader(strings.NewReader(strings.Repeat("e", 700))) },
		"data with EOF": func() io.Reader { return iotest.DataErrReader(strings.NewReader(strings.Repeat("f", 900))) },
		"cut short": func() io.Reader {
			return io.MultiReader(strings.NewReader(strings.Repeat("g", 600)), iotest.ErrReader(broken))
		},
		"nothing but an error": func() io.Reader { return iotest.ErrReader(broken) },
	}
	for name, body := range bodies {
		want, wantErr := io.ReadAll(io.LimitReader(body(), maxResponseBody))
		for _, prior := range [][]byte{nil, []byte("an earlier, longer answer that must not show through")} {
			got, err := readAnswer(prior[:0], body())
			if !bytes.Equal(got, want) || !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
				t.Errorf("%s, buffer of %d: %d bytes, %v; io.ReadAll: %d bytes, %v", name, cap(prior), len(got), err, len(want), wantErr)
			}
		}
	}
}
