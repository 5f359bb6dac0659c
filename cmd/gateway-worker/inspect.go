package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

// defaultScanLimit bounds how many entries inspect reads of each stream.
const defaultScanLimit = 10_000

func cmdInspect(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	rf.registerRegistry(fs, "Fleet", "whose heartbeat.stale_after says whether a pending entry's consumer is alive")
	fs.Group("Search")
	scanLimit := fs.Count("scan-limit", defaultScanLimit, "read at most `N` entries of each stream (0: all)")
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print one JSON object (snake_case keys)")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	id := fs.Arg(0)
	if id == "" {
		return fs.Fail(fmt.Errorf("JOB_ID is empty"))
	}
	st, reg, code := rf.openWithRegistry(ctx, fs, "gateway-inspect", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	now := time.Now()
	out, err := st.InspectReport(ctx, id, *scanLimit, reg.Heartbeat().StaleAfter, now)
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	if *asJSON {
		if code := printJSON(fs, stdout, stderr, out); code != cli.ExitOK {
			return code
		}
	} else {
		writeInspect(stdout, out, now)
	}
	if !out.Found {
		return cli.ExitNo
	}
	return cli.ExitOK
}
