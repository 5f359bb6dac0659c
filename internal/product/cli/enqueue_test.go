package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// TestEnqueueLines: every line with an id is written, in batches, blank lines skipped and the
// lines without one refused with their number and why; when Redis refuses a batch (here the
// prefix holds another shard count), the result says which line to run again from.
func TestEnqueueLines(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	var lines []string
	for i := range EnqueueBatch + 3 {
		lines = append(lines, fmt.Sprintf(`{"id":"j%d","payload":"x"}`, i))
	}
	lines = append(lines[:2], append([]string{"", " \t\r", `{"id":7}`, `["id"]`, `{"payload":"x"}`}, lines[2:]...)...)
	in := strings.Join(lines, "\n") + "\n"

	res, err := EnqueueLines(ctx, stream.NewProducer(c, "", 1), strings.NewReader(in), NewProgress(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	want := EnqueueResult{Written: EnqueueBatch + 3, Refused: []RefusedLine{
		{Line: 5, Reason: `no "id" string (the shard is chosen from it)`},
		{Line: 6, Reason: "not a JSON object: a JSON array"},
		{Line: 7, Reason: `no "id" string (the shard is chosen from it)`},
	}}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("result (-want +got):\n%s", d)
	}
	if n, err := c.XLen(ctx, stream.KeysFor("", 0).Intake).Result(); err != nil || n != EnqueueBatch+3 {
		t.Errorf("intake holds %d entries (%v), want %d", n, err, EnqueueBatch+3)
	}

	res, err = EnqueueLines(ctx, stream.NewProducer(c, "", 4), strings.NewReader(in), NewProgress(io.Discard))
	if err == nil || res.Written != 0 || res.ResumeAt != 1 {
		t.Errorf("with another shard count: %+v, %v; want an error, nothing written, resume at line 1", res, err)
	}
}

func TestLineJobID(t *testing.T) {
	for line, want := range map[string][2]string{
		`{"id":"a","payload":"x"}`: {"a", ""},
		`{"id":""}`:                {"", `no "id" string (the shard is chosen from it)`},
		`{"id":"a"`:                {"", "not a JSON object: unexpected EOF"},
		`id=a`:                     {"", "not a JSON object: invalid character 'i' looking for beginning of value"},
	} {
		if id, problem := LineJobID([]byte(line)); id != want[0] || problem != want[1] {
			t.Errorf("LineJobID(%s) = %q, %q; want %q, %q", line, id, problem, want[0], want[1])
		}
	}
}

// TestLineReaderLimit: a line of the limit is read whole, a longer one is measured and not
// held, and the lines after it, the last one without "\n" too, are read as they are.
func TestLineReaderLimit(t *testing.T) {
	const max = 70_000 // over the reader's own buffer, so a line spans reads
	in := strings.Repeat("a", max) + "\n" + strings.Repeat("b", max+1) + "\nc\r\n\nd"
	r := newLineReader(strings.NewReader(in), max)
	type got struct {
		head string
		len  int
		size int
	}
	var out []got
	for {
		b, size, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, got{string(b[:min(len(b), 2)]), len(b), size})
	}
	want := []got{{"aa", max, max}, {"", 0, max + 1}, {"c\r", 2, 2}, {"", 0, 0}, {"d", 1, 1}}
	if d := cmp.Diff(want, out, cmp.AllowUnexported(got{})); d != "" {
		t.Errorf("lines (-want +got):\n%s", d)
	}
}

// TestEnqueueLinesReadFailure: input that fails to read is an InputError, and the line to run
// again from is the one that could not be read, after every line before it was enqueued.
func TestEnqueueLinesReadFailure(t *testing.T) {
	srv := redistest.Start(t)
	in := io.MultiReader(strings.NewReader(`{"id":"a"}`+"\n"+`{"id":"b"}`+"\n"+`{"id":"c"`), iotest.ErrReader(errors.New("disk gone")))
	res, err := EnqueueLines(context.Background(), stream.NewProducer(srv.Client(t), "", 1), in, NewProgress(io.Discard))
	var inErr *InputError
	if !errors.As(err, &inErr) || res.Written != 2 || res.ResumeAt != 3 || !strings.Contains(err.Error(), "line 3: disk gone") {
		t.Errorf("EnqueueLines = %+v, %v; want 2 written, an InputError at line 3, resume at line 3", res, err)
	}
}

// TestReadIDs: a file of ids gives one a line, blank lines and spaces around skipped; a file
// of JSON-lines jobs (the file given to enqueue) gives the id of each, and the lines without
// one, which enqueue refused too, are counted and skipped.
func TestReadIDs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ids, skipped, err := ReadIDs(write("ids.txt", "a\n\n  b  \nc"))
	if err != nil || skipped != 0 || !cmp.Equal(ids, []string{"a", "b", "c"}) {
		t.Errorf("ids file: %q, %d, %v; want a, b, c", ids, skipped, err)
	}
	ids, skipped, err = ReadIDs(write("jobs.jsonl", `{"id":"x","payload":"p"}`+"\n"+`{"payload":"no id"}`+"\n\n"+`{"id":"y"}`+"\nnot json\n"))
	if err != nil || skipped != 2 || !cmp.Equal(ids, []string{"x", "y"}) {
		t.Errorf("jobs file: %q, %d, %v; want x and y, 2 skipped", ids, skipped, err)
	}
	if _, _, err := ReadIDs(filepath.Join(dir, "none.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file that does not exist: %v", err)
	}
}
