package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// demoGenericHost stands for a self-hosted push service the registry does not know.
const demoGenericHost = "push.example.net"

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	payload := fs.String("payload", "Hello from webpush-gateway", "message `TEXT` sent to every provider")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	if err := runDemo(ctx, *payload, stdout); err != nil {
		fmt.Fprintln(stderr, "gateway-worker demo:", err)
		return 1
	}
	return 0
}

// runDemo starts pushsim, subscribes once per provider, sends through the adapter path that
// `send` uses and prints what each simulated push service decrypted.
func runDemo(ctx context.Context, payload string, stdout io.Writer) error {
	sim, err := pushsim.Start(pushsim.Config{})
	if err != nil {
		return err
	}
	defer sim.Close()
	key, err := vapid.GenerateKey("default")
	if err != nil {
		return err
	}
	connectTo := append(sim.ConnectTo(), net.JoinHostPort(demoGenericHost, "443")+"="+sim.Addr())
	tf := transportFlags{connectTo: connectTo, caFile: sim.CAFile(), subject: "mailto:demo@webpush-gateway.example.com"}
	sender, err := tf.sender()
	if err != nil {
		return err
	}
	defer sender.Close()

	fmt.Fprintf(stdout, "pushsim on %s; one message to each push service through TLS and HTTP/2\n\n", sim.Addr())
	fmt.Fprintf(stdout, "%-9s %-10s %-6s %-8s %s\n", "PROVIDER", "CODE", "STATUS", "PROTO", "DECRYPTED BY THE PUSH SERVICE")
	failed := 0
	for _, target := range []struct{ provider, host string }{
		{"fcm", ""}, {"autopush", ""}, {"apple", ""}, {"wns", ""}, {"generic", demoGenericHost},
	} {
		sub, err := sim.Subscribe(target.provider, target.host, key.PublicKey())
		if err != nil {
			return err
		}
		var s adapter.Subscription
		s.Endpoint, s.Keys.P256dh, s.Keys.Auth = sub.Endpoint, sub.Keys.P256dh, sub.Keys.Auth
		msg := fmt.Sprintf("%s (%s)", payload, target.provider)
		out := sender.Send(ctx, &adapter.Message{Subscription: s, Payload: []byte(msg), TTL: 3600, Urgency: "normal", Key: key})
		seen, proto := "-", "-"
		if d := sim.DeliveriesFor(sub.Endpoint); len(d) > 0 {
			seen, proto = fmt.Sprintf("%q", d[len(d)-1].Plaintext), d[len(d)-1].Proto
		}
		if out.Code != "ACCEPTED" {
			failed++
			seen = out.Detail
		}
		fmt.Fprintf(stdout, "%-9s %-10s %-6d %-8s %s\n", out.Provider, out.Code, out.Status, proto, seen)
	}
	if failed > 0 {
		return fmt.Errorf("%d of 5 providers did not accept the message", failed)
	}
	return nil
}
