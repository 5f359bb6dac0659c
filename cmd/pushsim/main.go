// Command pushsim serves the push service simulator on its own (for staging, or for trying
// `gateway-worker send`): FCM, Autopush, Apple, WNS and a generic RFC 8030 service on one TLS
// listener, an admin API beside it, and the flags that point a sender at it.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
)

func main() { os.Exit(cli.Process(runMain)) }

// runMain is main without the process: tests call it. It serves until ctx ends.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("pushsim", stderr, cli.Help{
		Usage: "[--listen ADDR] [--admin ADDR] [--dir DIR] [--sample N] [--lean]",
		Summary: "Serve simulators of FCM, Autopush, Apple, WNS and a generic RFC 8030 service (" + pushsim.GenericHost + ") on one TLS listener, " +
			"with an admin API beside it that makes subscriptions and shows what was delivered, until interrupted.",
		Details: "It prints its CA file, its admin URL, the --ca-file and --connect-to flags that send a sender's requests for every host it serves to it, " +
			"and the same as one shell line to eval: export ADMIN=... CA=... CONNECT_TO=... (CONNECT_TO comma-separated, as --connect-to takes it).",
		Examples: []string{
			"pushsim --listen 127.0.0.1:8443 --admin 127.0.0.1:8444 --dir /tmp/pushsim",
			"pushsim --listen 127.0.0.1:0 --admin 127.0.0.1:0 > pushsim.env &   # then: eval \"$(grep ^export pushsim.env)\"",
		},
		Exit: "1 it could not start (an address in use, a directory it cannot write)",
	})
	fs.Group("Listen")
	listen := fs.String("listen", "127.0.0.1:8443", "TLS `ADDR` serving every push service host name (port 0: any free port)")
	admin := fs.String("admin", "127.0.0.1:0", "plain HTTP `ADDR` of the admin API")
	dir := fs.String("dir", "", "`DIR` to write the CA certificate into (default: a temporary folder)")
	fs.Group("Load runs")
	sample := fs.Int("sample", 1, "verify the JWT signature and decrypt the body of one push in `N`; 1 checks every push")
	lean := fs.Bool("lean", false, "keep no headers or bodies in the recorded deliveries")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if *sample < 1 {
		return fs.Fail(fmt.Errorf("--sample must be at least 1, got %d", *sample))
	}
	s, err := pushsim.Start(pushsim.Config{Addr: *listen, AdminAddr: *admin, Dir: *dir, Sample: *sample, Lean: *lean})
	if err != nil {
		fmt.Fprintln(stderr, "pushsim:", err)
		return cli.ExitNo
	}
	defer s.Close()
	connectTo := connectFlags(s)
	fmt.Fprintf(stdout, "pushsim listening on %s (TLS, HTTP/2 and HTTP/1.1)\n", s.Addr())
	fmt.Fprintf(stdout, "CA file:   %s\n", s.CAFile())
	fmt.Fprintf(stdout, "admin URL: %s\n", s.AdminURL())
	fmt.Fprintf(stdout, "send to it with: --ca-file %s --connect-to %s\n", s.CAFile(), strings.Join(connectTo, " --connect-to "))
	// Last, in one write: a script that waits for this line has everything above too.
	fmt.Fprintf(stdout, "export ADMIN=%s CA=%s CONNECT_TO=%s\n", shellWord(s.AdminURL()), shellWord(s.CAFile()), shellWord(strings.Join(connectTo, ",")))
	<-ctx.Done()
	return cli.ExitOK
}

// connectFlags are the --connect-to values for every host pushsim serves: the four services'
// and the generic one's.
func connectFlags(s *pushsim.Server) []string {
	out := s.ConnectTo()
	to := out[0][strings.LastIndex(out[0], "=")+1:] // the address every entry sends to
	return append(out, net.JoinHostPort(pushsim.GenericHost, "443")+"="+to)
}

// shellWord quotes s for a POSIX shell when it holds anything but the characters paths and
// URLs are usually made of.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/:._,=-+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
