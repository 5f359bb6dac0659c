package pushsim

import (
	"net"
	"strings"
)

// Provider ids: the classifier tables of taxonomy, one simulator personality each.
const (
	FCM      = "fcm"
	Autopush = "autopush"
	Apple    = "apple"
	WNS      = "wns"
	Generic  = "generic"
)

// Providers lists every provider id pushsim simulates.
func Providers() []string { return []string{FCM, Autopush, Apple, WNS, Generic} }

// Default hosts: the names real subscriptions carry. WNS has many data centres
// (wns2-<dc>.notify.windows.com); par02p is one seen in the wild.
const (
	FCMHost      = "fcm.googleapis.com"
	AutopushHost = "updates.push.services.mozilla.com"
	AppleHost    = "web.push.apple.com"
	WNSHost      = "wns2-par02p.notify.windows.com"
	GenericHost  = "push.example.net"
)

// providerHosts are the hosts ConnectTo routes, in a stable order.
var providerHosts = []string{FCMHost, AutopushHost, AppleHost, WNSHost}

func validProvider(p string) bool {
	switch p {
	case FCM, Autopush, Apple, WNS, Generic:
		return true
	}
	return false
}

// hostsOf says which hosts providerFor gives provider, for a refusal.
func hostsOf(provider string) string {
	switch provider {
	case FCM:
		return FCMHost
	case Autopush:
		return "push.services.mozilla.com or a host under it"
	case Apple:
		return AppleHost
	case WNS:
		return "a host under notify.windows.com"
	}
	return "any host the others do not take"
}

// defaultHost is the host Subscribe uses when the caller names none.
func defaultHost(provider string) string {
	switch provider {
	case FCM:
		return FCMHost
	case Autopush:
		return AutopushHost
	case Apple:
		return AppleHost
	case WNS:
		return WNSHost
	}
	return GenericHost
}

// providerFor picks the personality from the request's host, the way DNS does for the real
// services: anything that is not one of the four is a generic RFC 8030 service.
func providerFor(host string) string {
	name := hostname(host)
	switch {
	case name == FCMHost:
		return FCM
	case name == "push.services.mozilla.com" || strings.HasSuffix(name, ".push.services.mozilla.com"):
		return Autopush
	case name == AppleHost:
		return Apple
	case strings.HasSuffix(name, ".notify.windows.com"):
		return WNS
	}
	return Generic
}

// canonicalHost folds an authority the way origins compare: lower case, no trailing dot, and no
// port when it is https' default 443.
func canonicalHost(authority string) string {
	a := strings.ToLower(authority)
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return strings.TrimSuffix(a, ".")
	}
	host = strings.TrimSuffix(host, ".")
	if port == "443" || port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// hostname is canonicalHost without any port or IPv6 brackets.
func hostname(authority string) string {
	a := canonicalHost(authority)
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
}

// origin is the VAPID audience a push to this authority must carry (RFC 8292 section 2).
func origin(authority string) string { return "https://" + canonicalHost(authority) }
