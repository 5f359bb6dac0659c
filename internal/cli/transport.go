package cli

import (
	"flag"
	"fmt"
	"net/netip"

	webpushgateway "github.com/webpush-gateway/webpush-gateway"
	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/vapid"
)

// Transport is the flags every command that sends shares, and the Sender they describe.
type Transport struct {
	Registry  string
	ConnectTo ListFlag
	CAFile    string
	Allow     ListFlag
	Subject   string
	// JobIDHeader is not a flag of send; run sets it from --job-id-header.
	JobIDHeader string
}

// Register defines the flags on fs.
func (t *Transport) Register(fs *flag.FlagSet) {
	fs.StringVar(&t.Registry, "registry", "", "provider table `FILE` (default: the registry.yaml built into this binary)")
	fs.Var(&t.ConnectTo, "connect-to", "send `HOST:PORT=ADDR:PORT` elsewhere, like curl's --connect-to (repeatable)")
	fs.StringVar(&t.CAFile, "ca-file", "", "extra CA certificates (PEM `FILE`) trusted besides the system roots")
	fs.Var(&t.Allow, "allow-net", "open a blocked address range (`CIDR`) to endpoints (repeatable)")
	fs.StringVar(&t.Subject, "subject", "", "VAPID subject: a mailto: or https: `URL` push services can reach you at")
}

// LoadRegistry reads the provider table from path, or the built-in one when path is "".
func LoadRegistry(path string) (*providers.Registry, error) {
	if path == "" {
		return providers.Parse("registry.yaml (built in)", webpushgateway.DefaultRegistry)
	}
	return providers.Load(path)
}

// Sender builds the adapter set for reg from the flags.
func (t *Transport) Sender(reg *providers.Registry) (*adapter.Sender, error) {
	signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: t.Subject})
	if err != nil {
		return nil, err
	}
	connectTo, err := adapter.ParseConnectTo(t.ConnectTo)
	if err != nil {
		return nil, err
	}
	roots, err := adapter.LoadRootCAs(t.CAFile)
	if err != nil {
		return nil, err
	}
	var allow []netip.Prefix
	for _, c := range t.Allow {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("--allow-net %q: %w", c, err)
		}
		allow = append(allow, p)
	}
	return adapter.New(adapter.Config{Registry: reg, Signer: signer, ConnectTo: connectTo, RootCAs: roots, Allow: allow, JobIDHeader: t.JobIDHeader})
}
