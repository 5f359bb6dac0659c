package cli

import (
	"errors"
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
	// Proxy and ProxyCredentialsFile are --proxy and --proxy-credentials-file.
	Proxy                string
	ProxyCredentialsFile string
	// ProxyWatch, when set, hears of every tunnel through a proxy (run's metrics).
	ProxyWatch adapter.ProxyWatcher
	// JobIDHeader is not a flag of send; run sets it from --job-id-header.
	JobIDHeader string

	// signer is made by the first Sender and shared by every later one, so that a registry
	// reload keeps the VAPID cache and the signature counts.
	signer *vapid.Signer
}

// Register defines the flags on fs: the registry and the network ones under "Delivery", the
// VAPID subject under "VAPID" (the caller's --vapid-key belongs there too, defined after it).
func (t *Transport) Register(fs *FlagSet) {
	fs.Group("Delivery")
	fs.StringVar(&t.Registry, "registry", "", "provider table `FILE` (default: the registry.yaml built into this binary; `gateway-worker registry` prints it)")
	fs.Var(CommaList{&t.ConnectTo}, "connect-to", "send `HOST:PORT=ADDR:PORT` elsewhere, like curl's --connect-to (repeatable, or comma-separated)")
	fs.StringVar(&t.CAFile, "ca-file", "", "extra CA certificates (PEM `FILE`) trusted besides the system roots")
	fs.Var(CommaList{&t.Allow}, "allow-net", "open a blocked address range (`CIDR`) to endpoints (repeatable, or comma-separated)")
	fs.StringVar(&t.Proxy, "proxy", "", "send through the HTTP CONNECT proxy at `URL` (http:// or https://), or env for HTTPS_PROXY and NO_PROXY, or none; a registry entry's proxy: wins for its provider. Endpoint addresses are checked before the proxy is asked for them")
	fs.StringVar(&t.ProxyCredentialsFile, "proxy-credentials-file", "", "the proxy's Basic credentials, user:password on the first line of `FILE` (never logged)")
	fs.Group("VAPID")
	fs.StringVar(&t.Subject, "subject", "", "VAPID subject: a mailto: or https: `URL` push services can reach you at")
}

// BuiltinRegistryName is how messages name the provider table built into the binaries.
const BuiltinRegistryName = "registry.yaml (built in)"

// LoadRegistry reads the provider table from path, or the built-in one when path is "": the
// one rule of every command that takes --registry.
func LoadRegistry(path string) (*providers.Registry, error) {
	if path == "" {
		return providers.Parse(BuiltinRegistryName, webpushgateway.DefaultRegistry)
	}
	return providers.Load(path)
}

// Sender builds the adapter set for reg from the flags. Every Sender of one Transport signs
// with the same Signer. Not safe for concurrent use.
func (t *Transport) Sender(reg *providers.Registry) (*adapter.Sender, error) {
	return t.NextSender(reg, nil)
}

// NextSender is Sender for a registry that replaces the one prev was built for: the new
// Sender takes over prev's connections where a provider's connection settings are unchanged
// (adapter.Config.Reuse).
func (t *Transport) NextSender(reg *providers.Registry, prev *adapter.Sender) (*adapter.Sender, error) {
	if t.signer == nil {
		signer, err := vapid.NewSigner(vapid.SignerOptions{Subject: t.Subject})
		if err != nil {
			return nil, fmt.Errorf("--subject: %w", err)
		}
		t.signer = signer
	}
	connectTo, err := adapter.ParseConnectTo(t.ConnectTo)
	if err != nil {
		return nil, fmt.Errorf("--connect-to: %w", err)
	}
	roots, err := adapter.LoadRootCAs(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	var allow []netip.Prefix
	for _, c := range t.Allow {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("--allow-net %q: %w", c, err)
		}
		allow = append(allow, p)
	}
	proxy, err := adapter.ParseProxy(adapter.ProxyOptions{Spec: t.Proxy, CredentialsFile: t.ProxyCredentialsFile, RootCAs: roots})
	if err != nil {
		return nil, proxyFlagError(err)
	}
	proxy = proxy.WithWatcher(t.ProxyWatch)
	return adapter.NewSender(adapter.Config{Registry: reg, Signer: t.signer, ConnectTo: connectTo, RootCAs: roots, Allow: allow,
		JobIDHeader: t.JobIDHeader, Proxy: proxy, Reuse: prev})
}

// proxyFlagError names the flag of the proxy option ParseProxy refused.
func proxyFlagError(err error) error {
	var oe *adapter.ProxyOptionError
	if !errors.As(err, &oe) {
		return err
	}
	flag := "--proxy"
	if oe.Option == "CredentialsFile" {
		flag = "--proxy-credentials-file"
	}
	return fmt.Errorf("%s: %w", flag, oe.Err)
}
