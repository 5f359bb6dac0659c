package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker send", stderr)
	var (
		tf      cli.Transport
		subFile = fs.String("subscription", "", "PushSubscription JSON `FILE` ('-' for standard input)")
		payload = fs.String("payload", "", "the message `TEXT`")
		ttl     = fs.Int("ttl", 2419200, "seconds the push service keeps the message (clamped to the provider's maximum)")
		urgency = fs.String("urgency", "", "very-low, low, normal or high")
		topic   = fs.String("topic", "", "replace a pending message with this topic (at most 32 base64url characters)")
		keyFile = fs.String("vapid-key", "", "VAPID private key `FILE` (PEM, or the raw base64url key)")
	)
	tf.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return cli.ExitUsage(err)
	}
	if err := cli.NoArgs(fs); err != nil {
		return 2
	}
	if *subFile == "" || *keyFile == "" || tf.Subject == "" {
		fmt.Fprintln(stderr, "gateway-worker send: --subscription, --vapid-key and --subject are required")
		return 2
	}
	sub, err := readSubscription(*subFile)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker send:", err)
		return 2
	}
	key, err := vapid.LoadKeyFile("default", *keyFile)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker send:", err)
		return 2
	}
	reg, err := cli.LoadRegistry(tf.Registry)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker send:", err)
		return 2
	}
	s, err := tf.Sender(reg)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker send:", err)
		return 2
	}
	defer s.Close()
	out := s.Send(ctx, &adapter.Message{
		Subscription: sub, Payload: []byte(*payload), TTL: *ttl, Urgency: *urgency, Topic: *topic, Key: key,
	})
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(stderr, "gateway-worker send:", err)
		return 1
	}
	if out.Code != taxonomy.Accepted {
		return 1
	}
	return 0
}

// readSubscription reads a PushSubscription from a file or standard input.
func readSubscription(path string) (adapter.Subscription, error) {
	var sub adapter.Subscription
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return sub, fmt.Errorf("subscription: %w", err)
	}
	if err := json.Unmarshal(data, &sub); err != nil {
		return sub, fmt.Errorf("subscription %s: not PushSubscription JSON: %w", path, err)
	}
	if sub.Endpoint == "" || sub.Keys.P256dh == "" || sub.Keys.Auth == "" {
		return sub, fmt.Errorf("subscription %s: needs endpoint, keys.p256dh and keys.auth", path)
	}
	return sub, nil
}
