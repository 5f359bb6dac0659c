package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

func cmdPushsim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pushsim", stderr)
	listen := fs.String("listen", "127.0.0.1:8443", "TLS `ADDR` serving every push service host name")
	admin := fs.String("admin", "127.0.0.1:0", "plain HTTP `ADDR` of the admin API")
	dir := fs.String("dir", "", "`DIR` to write the CA certificate into (default: a temporary folder)")
	sample := fs.Int("sample", 1, "verify the JWT signature and decrypt the body of one push in `N` (load runs); 1 checks every push")
	lean := fs.Bool("lean", false, "keep no headers or bodies in the recorded deliveries (load runs)")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	if *sample < 1 {
		return exitUsage(fmt.Errorf("--sample must be at least 1"))
	}
	s, err := pushsim.Start(pushsim.Config{Addr: *listen, AdminAddr: *admin, Dir: *dir, Sample: *sample, Lean: *lean})
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker pushsim:", err)
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
