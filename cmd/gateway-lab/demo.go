package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/internal/demo"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-lab demo", stderr)
	var o demo.Options
	fault := fs.String("fault", "autopush=stall", "fault to inject halfway: `PROVIDER=stall|503:RATIO|429:SECONDS`, or none")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis `URL` to use (default: a throwaway redis-server when one is on PATH, else an in-process Redis)")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long jobs are enqueued; the fault comes halfway")
	fs.IntVar(&o.Rate, "rate", 200, "jobs enqueued per second, spread over the provider mix")
	fs.StringVar(&o.Report, "report", "demo-report.html", "`FILE` for the HTML report; the chart also goes to the same name with .png")
	fs.StringVar(&o.Payload, "payload", "Hello from webpush-gateway", "message `TEXT`")
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	if err := cli.NoArgs(fs); err != nil {
		return 2
	}
	var err error
	if o.Fault, err = demo.ParseFault(*fault); err != nil {
		return cli.UsageError(fs, err)
	}
	if err := o.Check(); err != nil {
		return cli.UsageError(fs, err)
	}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			o.Live = true
		}
	}
	if err := demo.Run(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-lab demo:", err)
		return 1
	}
	return 0
}
