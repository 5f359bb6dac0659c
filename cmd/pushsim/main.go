// Command pushsim serves the push service simulator on its own (for staging, or for trying
// `gateway-worker send`): FCM, Autopush, Apple, WNS and a generic RFC 8030 service on one TLS
// listener, an admin API beside it, and the flags that point a sender at it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

func main() { os.Exit(cli.Process(runMain)) }

// runMain is main without the process: tests call it. It serves until ctx ends.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("pushsim", stderr)
	listen := fs.String("listen", "127.0.0.1:8443", "TLS `ADDR` serving every push service host name")
	admin := fs.String("admin", "127.0.0.1:0", "plain HTTP `ADDR` of the admin API")
	dir := fs.String("dir", "", "`DIR` to write the CA certificate into (default: a temporary folder)")
	sample := fs.Int("sample", 1, "verify the JWT signature and decrypt the body of one push in `N` (load runs); 1 checks every push")
	lean := fs.Bool("lean", false, "keep no headers or bodies in the recorded deliveries (load runs)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	if err := cli.NoArgs(fs); err != nil {
		return 2
	}
	if *sample < 1 {
		return cli.UsageError(fs, fmt.Errorf("--sample must be at least 1"))
	}
	s, err := pushsim.Start(pushsim.Config{Addr: *listen, AdminAddr: *admin, Dir: *dir, Sample: *sample, Lean: *lean})
	if err != nil {
		fmt.Fprintln(stderr, "pushsim:", err)
		return 1
	}
	defer s.Close()
	fmt.Fprintf(stdout, "pushsim listening on %s (TLS, HTTP/2 and HTTP/1.1)\n", s.Addr())
	fmt.Fprintf(stdout, "CA file:   %s\n", s.CAFile())
	fmt.Fprintf(stdout, "admin URL: %s\n", s.AdminURL())
	fmt.Fprintf(stdout, "send to it with: --ca-file %s --connect-to %s\n", s.CAFile(), strings.Join(s.ConnectTo(), " --connect-to "))
	<-ctx.Done()
	return 0
}
