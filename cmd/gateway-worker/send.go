package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// transportFlags are the flags every command that sends shares.
type transportFlags struct {
	registry  string
	connectTo listFlag
	caFile    string
	allow     listFlag
	subject   string
	// jobIDHeader is not a flag of send; run sets it from --job-id-header.
	jobIDHeader string
}

func (t *transportFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.registry, "registry", "", "provider table `FILE` (default: the registry.yaml built into this binary)")
	fs.Var(&t.connectTo, "connect-to", "send `HOST:PORT=ADDR:PORT` elsewhere, like curl's --connect-to (repeatable)")
	fs.StringVar(&t.caFile, "ca-file", "", "extra CA certificates (PEM `FILE`) trusted besides the system roots")
	fs.Var(&t.allow, "allow-net", "open a blocked address range (`CIDR`) to endpoints (repeatable)")
	fs.StringVar(&t.subject, "subject", "", "VAPID subject: a mailto: or https: `URL` push services can reach you at")
}

// loadRegistry reads the provider table from path, or the built-in one.
func loadRegistry(path string) (*providers.Registry, error) {
	if path == "" {
		return providers.Parse("registry.yaml (built in)", webpushgateway.DefaultRegistry)
	}
	return providers.Load(path)
}

// sender builds the adapter set for reg from the flags.
func (t *transportFlags) sender(reg *providers.Registry) (*adapter.Sender, error) {
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: t.subject})
	if err != nil {
		return nil, err
	}
	connectTo, err := adapter.ParseConnectTo(t.connectTo)
	if err != nil {
		return nil, err
	}
	roots, err := adapter.LoadRootCAs(t.caFile)
	if err != nil {
		return nil, err
	}
	var allow []netip.Prefix
	for _, c := range t.allow {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("--allow-net %q: %w", c, err)
		}
		allow = append(allow, p)
	}
	return adapter.New(adapter.Config{Registry: reg, Signer: signer, ConnectTo: connectTo, RootCAs: roots, Allow: allow, JobIDHeader: t.jobIDHeader})
}

func cmdSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("send", stderr)
	var (
		tf      transportFlags
		subFile = fs.String("subscription", "", "PushSubscription JSON `FILE` ('-' for standard input)")
		payload = fs.String("payload", "", "the message `TEXT`")
		ttl     = fs.Int("ttl", 2419200, "seconds the push service keeps the message (clamped to the provider's maximum)")
		urgency = fs.String("urgency", "", "very-low, low, normal or high")
		topic   = fs.String("topic", "", "replace a pending message with this topic (at most 32 base64url characters)")
		keyFile = fs.String("vapid-key", "", "VAPID private key `FILE` (PEM, or the raw base64url key)")
	)
	tf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return exitUsage(err)
	}
	if err := noArgs(fs); err != nil {
		return 2
	}
	if *subFile == "" || *keyFile == "" || tf.subject == "" {
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
	reg, err := loadRegistry(tf.registry)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker send:", err)
		return 2
	}
	s, err := tf.sender(reg)
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

// exitUsage maps a flag parsing error to its exit code: -h is not a failure.
func exitUsage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
