package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

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
	res, err := cli.EnqueueLines(ctx, st.Producer(stream.WaitReplicas(*waitReplicas, *waitTimeout)), in, cli.NewProgress(stderr))
	tooLong := 0
	for _, r := range res.Refused {
		fmt.Fprintf(stderr, "%s:%d: not enqueued: %s\n", name, r.Line, r.Reason)
		if r.TooLong {
			tooLong++
		}
	}
	fmt.Fprintf(stdout, "enqueued %d jobs from %s", res.Written, name)
	if len(res.Refused) > 0 {
		fmt.Fprintf(stdout, "; %d lines refused (listed above)", len(res.Refused))
	}
	fmt.Fprintln(stdout)
	if err != nil {
		if res.ResumeAt > 0 {
			fmt.Fprintf(stderr, "gateway-worker enqueue: %v\nevery job before line %d is enqueued or listed above; run again from line %d\n", err, res.ResumeAt, res.ResumeAt)
		} else {
			fmt.Fprintf(stderr, "gateway-worker enqueue: stopped after %d jobs: %v\n", res.Written, err)
		}
		var inErr *cli.InputError
		if errors.As(err, &inErr) {
			return cli.ExitUsage
		}
		return redisExitCode(err)
	}
	switch {
	case tooLong > 0:
		// Not one bad job but input that is not job lines: the class of a refused argument.
		return cli.ExitUsage
	case len(res.Refused) > 0:
		return cli.ExitNo
	}
	return cli.ExitOK
}
