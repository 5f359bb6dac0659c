package main

import (
	"context"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/stream/inspect"
)

func cmdCancel(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	ids := fs.Args()
	for i, id := range ids {
		if id == "" {
			return fs.Fail(fmt.Errorf("JOB_ID %d is empty", i+1))
		}
		if len(id) > job.MaxIDLen {
			return fs.Fail(fmt.Errorf("JOB_ID %d is %d bytes; a job id is at most %d", i+1, len(id), job.MaxIDLen))
		}
	}
	st, code := rf.openReader(ctx, fs, "gateway-cancel", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	res, err := st.Cancel(ctx, ids...)
	// What was done before an error is reported too: those jobs are cancelled.
	notStopped := 0
	for _, r := range res {
		switch r.State {
		case inspect.Canceled:
			fmt.Fprintf(stdout, "%s: cancelled (it waited in %s); its ledger record is %s\n", r.ID, r.Where, inspect.CodeCanceled)
		case inspect.CancelInFlight:
			notStopped++
			fmt.Fprintf(stdout, "%s: not cancelled: in flight (a worker has read it from %s); it ends with its own record\n", r.ID, r.Where)
		case inspect.CancelSent:
			notStopped++
			fmt.Fprintf(stdout, "%s: not cancelled: sent (its push service accepted it already)\n", r.ID)
		default:
			notStopped++
			fmt.Fprintf(stdout, "%s: not cancelled: unknown (held nowhere under prefix %s: never enqueued, already ended, or cancelled before)\n", r.ID, rf.prefix)
		}
	}
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	if notStopped > 0 {
		return cli.ExitNo
	}
	return cli.ExitOK
}
