package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// enqueueBatch is how many jobs go to Redis in one pipeline.
const enqueueBatch = 500

func cmdEnqueue(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.register(fs)
	fs.Group("Replication")
	waitReplicas := fs.Int("wait-replicas", 0, "after each batch, wait until this many replicas of every master written to have it (Redis WAIT): a failover then loses no job reported enqueued (0: no wait; see docs/operations.md)")
	waitTimeout := fs.Duration("wait-timeout", stream.DefaultWaitTimeout, "how long each master may take to reach --wait-replicas; a batch not replicated in time stops the command, which says where to run again from")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if err := rf.check(); err != nil {
		return fs.Fail(err)
	}
	if *waitReplicas < 0 {
		return fs.Fail(fmt.Errorf("--wait-replicas must be 0 or more, got %d", *waitReplicas))
	}
	if *waitTimeout <= 0 {
		return fs.Fail(fmt.Errorf("--wait-timeout must be positive, got %v", *waitTimeout))
	}
	in, name, err := openInput(fs.Arg(0))
	if err != nil {
		return fs.Fail(err)
	}
	defer in.Close()
	st, err := stream.Open(rf.url, stream.OpenOptions{
		Options: stream.Options{Prefix: rf.prefix, Shards: rf.shards}, ClientName: "gateway-enqueue",
	})
	if err != nil {
		return fs.Fail(fmt.Errorf("--redis: %w", err))
	}
	defer st.Close()
	res, err := enqueueLines(ctx, st.Producer(stream.WaitReplicas(*waitReplicas, *waitTimeout)), in, newProgress(stderr))
	for _, r := range res.refused {
		fmt.Fprintf(stderr, "%s:%d: not enqueued: %s\n", name, r.line, r.reason)
	}
	fmt.Fprintf(stdout, "enqueued %d jobs from %s", res.written, name)
	if len(res.refused) > 0 {
		fmt.Fprintf(stdout, "; %d lines refused (listed above)", len(res.refused))
	}
	fmt.Fprintln(stdout)
	if err != nil {
		if res.resumeAt > 0 {
			fmt.Fprintf(stderr, "gateway-worker enqueue: %v\nevery job before line %d is enqueued; run again from line %d\n", err, res.resumeAt, res.resumeAt)
		} else {
			fmt.Fprintf(stderr, "gateway-worker enqueue: stopped after %d jobs: %v\n", res.written, err)
		}
		return redisExitCode(err)
	}
	if len(res.refused) > 0 {
		return cli.ExitNo
	}
	return cli.ExitOK
}

type refusedLine struct {
	line   int
	reason string
}

type enqueueResult struct {
	written int
	refused []refusedLine
	// resumeAt is the input line to run again from after a failure (0: none failed).
	resumeAt int
}

// enqueueLines sends every line that is a JSON object with an id, in pipelined batches. A line
// without one cannot be sharded, so it is refused here with its line number rather than lost;
// everything else, however malformed, is the worker's to dead-letter with a reason.
func enqueueLines(ctx context.Context, p *stream.Producer, in io.Reader, prog *progress) (enqueueResult, error) {
	var res enqueueResult
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a line over the entry limit still reaches the worker's dead stream
	batch := make([][]byte, 0, enqueueBatch)
	batchLines := make([]int, 0, enqueueBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := p.Enqueue(ctx, batch...)
		res.written += n
		if err != nil {
			res.resumeAt = batchLines[n]
		}
		prog.update(res.written)
		batch, batchLines = batch[:0], batchLines[:0]
		return err
	}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		if _, reason := jobID(b); reason != "" {
			res.refused = append(res.refused, refusedLine{line, reason})
			continue
		}
		batch = append(batch, append([]byte(nil), b...))
		batchLines = append(batchLines, line)
		if len(batch) == enqueueBatch {
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
	prog.done(res.written)
	return res, err
}

// jobID is the string id of a JSON-lines job, or why the line has none to choose its shard by
// (then enqueue refuses it, and audit skips it).
func jobID(line []byte) (id, problem string) {
	id, err := job.PeekID(line)
	switch {
	case errors.Is(err, job.ErrNotObject):
		return "", strings.TrimPrefix(err.Error(), "job: ")
	case err != nil:
		return "", `no "id" string (the shard is chosen from it)`
	}
	return id, ""
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// progress draws a one-line counter on a terminal, at most ten times a second, and nothing
// when the output is a file or a pipe.
type progress struct {
	w    io.Writer
	on   bool
	last time.Time
	t0   time.Time
}

func newProgress(w io.Writer) *progress {
	on := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{w: w, on: on, t0: time.Now()}
}

func (p *progress) update(n int) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	rate := float64(n) / time.Since(p.t0).Seconds()
	fmt.Fprintf(p.w, "\r[%-30s] %d jobs, %.0f/s", bar(n), n, rate)
}

func (p *progress) done(n int) {
	if p.on {
		fmt.Fprintf(p.w, "\r[%-30s] %d jobs in %s\n", bar(-1), n, time.Since(p.t0).Round(time.Millisecond))
	}
}

// bar is a spinner-like fill: the total is unknown while reading a stream.
func bar(n int) string {
	if n < 0 {
		return "=============================="
	}
	w := (n / enqueueBatch) % 31
	s := make([]byte, w)
	for i := range s {
		s[i] = '='
	}
	return string(s)
}
