package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

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
		{5, `no "id" string (the shard is chosen from it)`},
		{6, "not a JSON object: a JSON array"},
		{7, `no "id" string (the shard is chosen from it)`},
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
