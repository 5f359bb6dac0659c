package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/job"
)

// EnqueueBatch is how many jobs `gateway-worker enqueue` sends to Redis in one pipeline.
const EnqueueBatch = 500

// Enqueuer puts jobs on the intake streams, returning how many from the first were written
// before a failure: stream.Producer.
type Enqueuer interface {
	Enqueue(ctx context.Context, jobs ...[]byte) (int, error)
}

// RefusedLine is an input line that was not enqueued, and why.
type RefusedLine struct {
	Line   int
	Reason string
}

// EnqueueResult is what EnqueueLines did.
type EnqueueResult struct {
	Written int
	Refused []RefusedLine
	// ResumeAt is the input line to run again from after a failure (0: none failed).
	ResumeAt int
}

// EnqueueLines sends every line of in that is a JSON object with an id to p, in pipelined
// batches of EnqueueBatch, counting them on prog. A line without one cannot be sharded, so it
// is refused here with its line number rather than lost; everything else, however malformed,
// is the worker's to dead-letter with a reason. Blank lines are skipped.
func EnqueueLines(ctx context.Context, p Enqueuer, in io.Reader, prog *Progress) (EnqueueResult, error) {
	var res EnqueueResult
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a line over the entry limit still reaches the worker's dead stream
	batch := make([][]byte, 0, EnqueueBatch)
	batchLines := make([]int, 0, EnqueueBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := p.Enqueue(ctx, batch...)
		res.Written += n
		if err != nil {
			res.ResumeAt = batchLines[n]
		}
		prog.update(res.Written)
		batch, batchLines = batch[:0], batchLines[:0]
		return err
	}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(bytes.Trim(b, " \t\r")) == 0 {
			continue
		}
		if _, reason := LineJobID(b); reason != "" {
			res.Refused = append(res.Refused, RefusedLine{line, reason})
			continue
		}
		batch = append(batch, append([]byte(nil), b...))
		batchLines = append(batchLines, line)
		if len(batch) == EnqueueBatch {
			if err := flush(); err != nil {
				return res, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		_ = flush()
		return res, fmt.Errorf("line %d: %w", line+1, err)
	}
	err := flush()
	prog.done(res.Written)
	return res, err
}

// LineJobID is the string id of a JSON-lines job, or why the line has none to choose its
// shard by (then enqueue refuses it, and audit skips it).
func LineJobID(line []byte) (id, problem string) {
	id, err := job.PeekID(line)
	switch {
	case errors.Is(err, job.ErrNotObject):
		return "", strings.TrimPrefix(err.Error(), "job: ")
	case err != nil:
		return "", `no "id" string (the shard is chosen from it)`
	}
	return id, ""
}

// Progress draws a one-line counter of jobs on a terminal, at most ten times a second, and
// nothing when the output is a file or a pipe.
type Progress struct {
	w    io.Writer
	on   bool
	last time.Time
	t0   time.Time
}

// NewProgress draws on w when it is a terminal.
func NewProgress(w io.Writer) *Progress {
	on := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &Progress{w: w, on: on, t0: time.Now()}
}

func (p *Progress) update(n int) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	rate := float64(n) / time.Since(p.t0).Seconds()
	fmt.Fprintf(p.w, "\r[%-30s] %d jobs, %.0f/s", bar(n), n, rate)
}

func (p *Progress) done(n int) {
	if p.on {
		fmt.Fprintf(p.w, "\r[%-30s] %d jobs in %s\n", bar(-1), n, time.Since(p.t0).Round(time.Millisecond))
	}
}

// bar is a spinner-like fill: the total is unknown while reading a stream.
func bar(n int) string {
	if n < 0 {
		return strings.Repeat("=", 30)
	}
	return strings.Repeat("=", (n/EnqueueBatch)%31)
}
