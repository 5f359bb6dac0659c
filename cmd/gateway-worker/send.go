package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("gateway-worker send", stderr)
	var (
		tf      cli.Transport
		subFile = fs.String("subscription", "", "PushSubscription JSON `FILE` ('-' for standard input)")
		payload = fs.String("payload", "", "the message `TEXT`")
		ttl     = fs.Int("ttl", job.DefaultTTL, "seconds the push service keeps the message (clamped to the provider's maximum)")
		urgency = fs.String("urgency", "", strings.Join(job.Urgencies, ", "))
		topic   = fs.String("topic", "", fmt.Sprintf("replace a pending message with this topic (at most %d base64url characters)", job.MaxTopicLen))
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
	data, err := readSubscription(*subFile)
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
	var out taxonomy.Outcome
	if sub, reason := checkSubscription(data, reg); reason != "" {
		out = taxonomy.Local("", taxonomy.InvalidJob, reason)
	} else {
		out = s.Send(ctx, &adapter.Message{
			Subscription: sub, Payload: []byte(*payload), TTL: *ttl, Urgency: *urgency, Topic: *topic, Key: key,
		})
	}
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

// readSubscription reads a PushSubscription's JSON from a file or standard input.
func readSubscription(path string) ([]byte, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("subscription: %w", err)
	}
	return data, nil
}

// checkSubscription judges a subscription as the intake judges a job's: decoded by the job
// format's rules, then routed by the registry. A subscription either refuses is INVALID_JOB
// with the reason a dead record of the job would give.
func checkSubscription(data []byte, reg *providers.Registry) (job.Subscription, string) {
	sub, err := job.DecodeSubscription(data)
	var invalid *job.InvalidError
	switch {
	case errors.As(err, &invalid):
		return sub, invalid.Reason
	case err != nil:
		return sub, err.Error()
	}
	if _, err := reg.Resolve(sub.Endpoint); err != nil {
		return sub, job.EndpointReason(err)
	}
	return sub, ""
}
