package providers

import (
	"errors"
	"net"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ProxyNone is the proxy value that sends a provider's connections direct even when the worker
// runs with a proxy.
const ProxyNone = "none"

// ParseProxyURL reads an HTTP CONNECT proxy's URL: http:// or https://, a host, an optional
// port (80 or 443 by scheme when absent), nothing after the authority. It returns the URL
// with its port made explicit and its credentials (user:password, "" when the URL has none)
// taken out. Its errors never quote the value, which may hold a password.
func ParseProxyURL(raw string) (u *url.URL, credentials string, err error) {
	u, perr := url.Parse(strings.TrimSpace(raw))
	if perr != nil {
		return nil, "", errors.New("not a URL; want http://host:port or https://host:port")
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, "", errors.New("want an http:// or https:// proxy URL")
	}
	if u.Hostname() == "" {
		return nil, "", errors.New("the proxy URL has no host")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, "", errors.New("a proxy URL is scheme://host:port only, with no path or query")
	}
	if u.User != nil {
		credentials = u.User.Username()
		if pw, ok := u.User.Password(); ok {
			credentials += ":" + pw
		}
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return &url.URL{Scheme: u.Scheme, Host: net.JoinHostPort(strings.ToLower(u.Hostname()), port)}, credentials, nil
}

// parseProxySetting is the registry's proxy: a URL without credentials (they would sit in a
// file that is no secret; they come from the worker's --proxy-credentials-file), or none.
func parseProxySetting(n *yaml.Node, p *Provider) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Value == "" {
		return "want a proxy URL (http://host:port) or none, got " + describe(n)
	}
	if n.Value == ProxyNone {
		p.Proxy = ProxyNone
		return ""
	}
	u, creds, err := ParseProxyURL(n.Value)
	if err != nil {
		return err.Error()
	}
	if creds != "" {
		return "credentials do not belong in the registry; give them to the worker with --proxy-credentials-file"
	}
	p.Proxy = u.String()
	return ""
}
