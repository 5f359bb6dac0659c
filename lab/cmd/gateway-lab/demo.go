package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/lab/demo"
)

func cmdDemo(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var o demo.Options
	fs.Group("Redis")
	fs.StringVar(&o.RedisURL, "redis", "", "Redis `URL` to use (default: a throwaway redis-server on a free port)")
	fs.Group("Traffic")
	fault := fs.String("fault", "autopush=stall", "fault to inject halfway: `PROVIDER=stall|503:RATIO|429:SECONDS`, or none")
	fs.DurationVar(&o.Duration, "duration", time.Minute, "how long jobs are enqueued; the fault comes halfway")
	fs.IntVar(&o.Rate, "rate", 200, "jobs enqueued per second (`N`), spread over the provider mix")
	fs.StringVar(&o.Payload, "payload", "Hello from webpush-gateway", "message `TEXT`")
	fs.Group("Report")
	fs.StringVar(&o.Report, "report", "demo-report.html", "`FILE` for the HTML report; the chart also goes to the same name with .png")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	var err error
	if o.Fault, err = demo.ParseFault(*fault); err != nil {
		return fs.Fail(err)
	}
	if err := o.Check(); err != nil {
		return fs.Fail(err)
	}
	if f, ok := stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			o.Live = true
		}
	}
	if err := demo.Run(ctx, o, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-lab demo:", err)
		return cli.ExitNo
	}
	return cli.ExitOK
}
