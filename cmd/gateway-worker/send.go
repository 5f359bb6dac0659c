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
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

func cmdSend(ctx context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	var tf cli.Transport
	fs.Group("Message")
	subFile := fs.String("subscription", "", "PushSubscription JSON `FILE` ('-' for standard input)")
	payload := fs.String("payload", "", "the message `TEXT`")
	ttl := fs.Int("ttl", job.DefaultTTL, "`SECONDS` the push service keeps the message (clamped to the provider's maximum)")
	urgency := fs.String("urgency", "", "`URGENCY`: "+strings.Join(job.Urgencies, ", "))
	topic := fs.String("topic", "", fmt.Sprintf("replace a pending message with this `TOPIC` (at most %d base64url characters)", job.MaxTopicLen))
	tf.Register(fs) // Delivery, then VAPID
	keyFile := fs.String("vapid-key", "", "VAPID private key `FILE` (PEM, or the raw base64url key)")
	fs.Require("subscription", "vapid-key", "subject")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	data, err := readSubscription(*subFile)
	if err != nil {
		return fs.Fail(fmt.Errorf("--subscription: %w", err))
	}
	key, err := vapid.LoadKeyFile("default", *keyFile)
	if err != nil {
		return fs.Fail(fmt.Errorf("--vapid-key: %w", err))
	}
	reg, err := cli.LoadRegistry(tf.Registry)
	if err != nil {
		return fs.Fail(fmt.Errorf("--registry: %w", err))
	}
	s, err := tf.Sender(reg)
	if err != nil {
		return fs.Fail(err)
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
		return failure(stderr, fs.Name(), cli.ExitNo, err)
	}
	if out.Code != taxonomy.Accepted {
		return cli.ExitNo
	}
	return cli.ExitOK
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
		return nil, err
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
