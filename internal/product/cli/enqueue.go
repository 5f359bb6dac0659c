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

// MaxEnqueueLine is the longest line EnqueueLines reads: far over the entry limit, so that a
// job too big for an entry still reaches the worker's dead stream with its reason, and short
// enough that one line cannot exhaust the command's memory.
const MaxEnqueueLine = 16 << 20

// RefusedLine is an input line that was not enqueued, and why. TooLong says it was over
// MaxEnqueueLine, which is an error in the input rather than in one job.
type RefusedLine struct {
	Line    int
	Reason  string
	TooLong bool
}

// EnqueueResult is what EnqueueLines did.
type EnqueueResult struct {
	Written int
	Refused []RefusedLine
	// ResumeAt is the input line to run again from after a failure (0: none failed): every
	// line before it was enqueued or refused.
	ResumeAt int
}

// InputError is a failure to read the input (not Redis's).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// EnqueueLines sends every line of in that is a JSON object with an id to p, in pipelined
// batches of EnqueueBatch, counting them on prog. A line without one cannot be sharded, so it
// is refused here with its line number rather than lost; so is a line over MaxEnqueueLine,
// with its size, which is read past (never held whole) so that the lines after it are still
// enqueued. Everything else, however malformed, is the worker's to dead-letter with a reason.
// Blank lines are skipped. A failure to read in is an *InputError.
func EnqueueLines(ctx context.Context, p Enqueuer, in io.Reader, prog *Progress) (EnqueueResult, error) {
	var res EnqueueResult
	r := newLineReader(in, MaxEnqueueLine)
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
	for {
		b, size, err := r.next()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			if ferr := flush(); ferr != nil {
				return res, ferr
			}
			// Every line before this one is enqueued or refused: run again from it.
			res.ResumeAt = line
			return res, &InputError{fmt.Errorf("line %d: %w", line, err)}
		}
		if size > MaxEnqueueLine {
			res.Refused = append(res.Refused, RefusedLine{Line: line, TooLong: true,
				Reason: fmt.Sprintf("the line is %d bytes, over the %d-byte limit of a line (a job's entry holds at most 64 KiB)", size, MaxEnqueueLine)})
			continue
		}
		if len(bytes.Trim(b, " \t\r")) == 0 {
			continue
		}
		if _, reason := LineJobID(b); reason != "" {
			res.Refused = append(res.Refused, RefusedLine{Line: line, Reason: reason})
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
	err := flush()
	prog.done(res.Written)
	return res, err
}

// lineReader reads lines of at most max bytes; a longer one is read past and only measured.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(in io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(in, 64<<10), max: max}
}

// next returns the next line without its "\n" and its size in bytes; a line over max comes
// back empty with its whole size. io.EOF means no line is left; a last line without "\n" is a
// line.
func (l *lineReader) next() (line []byte, size int, err error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		size += len(chunk)
		if size <= l.max+1 { // +1: the "\n" is not the line's
			l.buf = append(l.buf, chunk...)
		} else {
			l.buf = l.buf[:0]
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && size == 0:
			return nil, 0, io.EOF
		case err != nil && err != io.EOF:
			return nil, size, err
		}
		if n := len(l.buf); n > 0 && l.buf[n-1] == '\n' {
			l.buf = l.buf[:n-1]
		}
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			size--
		}
		return l.buf, size, nil
	}
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

// ReadIDs reads the job ids `gateway-worker audit --ids` checks from the file at path: one id
// a line or, when the first line is a JSON object, the "id" of each JSON-lines job, so the
// file given to enqueue can be audited as it is. In that form a line without an id was refused
// by enqueue too, so it is skipped and counted.
func ReadIDs(path string) (ids []string, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), MaxEnqueueLine)
	jsonLines, first := false, true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if first {
			jsonLines, first = strings.HasPrefix(line, "{"), false
		}
		if !jsonLines {
			ids = append(ids, line)
			continue
		}
		id, problem := LineJobID([]byte(line))
		if problem != "" {
			skipped++
			continue
		}
		ids = append(ids, id)
	}
	return ids, skipped, sc.Err()
}
