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
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	s, err := pushsim.Start(pushsim.Config{Addr: *listen, AdminAddr: *admin, Dir: *dir})
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
