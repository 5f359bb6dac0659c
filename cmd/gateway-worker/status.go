package main

import (
	"context"
	"io"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
)

func cmdStatus(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var rf redisFlags
	rf.registerReader(fs)
	rf.registerRegistry(fs, "Fleet", "whose heartbeat.stale_after says which replicas are live")
	fs.Group("Output")
	asJSON := fs.Bool("json", false, "print one JSON object (snake_case keys) instead of tables")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	st, reg, code := rf.openWithRegistry(ctx, fs, "gateway-status", stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	rep, err := st.Status(ctx, reg.Heartbeat().StaleAfter, time.Now())
	if err != nil {
		return unavailable(stderr, fs.Name(), err)
	}
	if *asJSON {
		return printJSON(fs, stdout, stderr, rep)
	}
	writeStatus(stdout, rep)
	return cli.ExitOK
}
