package providers_test

import (
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// FuzzParse: Parse never panics and returns either a usable registry or a List whose every item
// has a line, this file's name and a problem.
func FuzzParse(f *testing.F) {
	if shipped, err := os.ReadFile("../registry.yaml"); err == nil {
		f.Add(shipped)
	} else {
		f.Fatal(err)
	}
	for _, s := range []string{
		"",
		"version: 1\nproviders:\n  - id: fallback\n",
		"version: 1\ndefaults: {timeout: 3s, breaker: {probes: 2}}\nproviders:\n  - {id: fallback}\n  - {id: a, kind: autopush, hosts: [a.example.]}\n",
		"version: 1\nproviders:\n  - id: fallback\n    brust: 1\n---\nx: 1\n",
		"version: 1\ndefaults: &d {rate: 5}\nproviders:\n  - id: fallback\n    <<: *d\n",
		"version: 1\nproviders:\n  - id: x\n    hosts: ['*.a', 'https://b/c', 'C:1', '1.2.3.4', 'ä.example']\n",
		"version: 1\nproviders:\n  - id: fallback\n    timeout: 1s\n    connect_timeout: 2s\n    max_ttl: 99999999s\n",
		"[[[[",
		"version: 1\nbudget: {total_in_flight: 2, every: 1s}\nhost_breaker: {failures: 1}\nheartbeat: {every: 1s, stale_after: 2s}\nproviders:\n  - {id: fallback, min_in_flight: 3, max_in_flight: 2, retry_share: 0.1}\n",
		"version: 1\ndefaults: {min_in_flight: 4, per_recipient_in_flight: 0}\nproviders:\n  - {id: fallback, max_in_flight: 3}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := providers.Parse("f.yaml", data)
		if (reg == nil) == (err == nil) {
			t.Fatalf("Parse returned registry %v and error %v; want exactly one", reg, err)
		}
		if err != nil {
			var list providers.List
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty List", err, err)
			}
			for _, e := range list {
				if e.Line < 1 || e.File != "f.yaml" || e.Problem == "" {
					t.Fatalf("bad item %+v", e)
				}
			}
			return
		}
		fb := reg.Fallback()
		if fb == nil || fb.ID != "fallback" || len(fb.Hosts) != 0 {
			t.Fatalf("fallback = %+v", fb)
		}
		if b := reg.Budget(); b != nil && (b.TotalInFlight < len(reg.Providers()) || b.Every <= 0 || b.HalfLife <= 0) {
			t.Fatalf("accepted an impossible budget %+v", b)
		}
		if hb := reg.HostBreaker(); hb.Failures < 1 || hb.Cooldown <= 0 || hb.MaxHosts < 1 {
			t.Fatalf("accepted an impossible host breaker %+v", hb)
		}
		if beat := reg.Heartbeat(); beat.Every <= 0 || beat.StaleAfter < 2*beat.Every {
			t.Fatalf("accepted an impossible heartbeat %+v", beat)
		}
		for _, p := range reg.Providers() {
			if p.MinInFlight < 1 || p.MinInFlight > p.MaxInFlight || p.RetryShare <= 0 || p.RetryShare > 1 || p.PerRecipientInFlight < 0 {
				t.Fatalf("accepted impossible in-flight settings %+v", p)
			}
			if p.Rate <= 0 || p.Burst < 1 || p.MaxInFlight < 1 || p.Timeout <= 0 || p.ConnectTimeout > p.Timeout ||
				p.Breaker.FailureRatio <= 0 || p.Breaker.FailureRatio > 1 || p.Breaker.Probes < 1 || p.Breaker.MinSamples < 1 {
				t.Fatalf("accepted an impossible entry %+v", p)
			}
			for _, h := range p.Hosts {
				rt, err := reg.Resolve("https://" + h + "/x")
				if err != nil || rt.Provider != p {
					t.Fatalf("host %q of %s resolves to %v, %v", h, p.ID, rt.Provider, err)
				}
			}
		}
	})
}

// FuzzResolve: Resolve never panics; a route is normalised and stable, an error is one of the
// sentinels and never quotes the endpoint's path.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"https://fcm.googleapis.com/fcm/send/abc",
		"https://wns2-par02p.notify.windows.com/w/?token=BQYAAA%2b%2f",
		"HTTPS://Web.Push.Apple.COM.:443/x",
		"https://[::1]:8443/x",
		"https://u:p@a.example/x",
		"http://a.example/x",
		"https:opaque",
		"https://evilgoogleapis.com/x",
		"https://a..b/x",
		"https://[fe80::1%25en0]/",
		"",
	} {
		f.Add(s)
	}
	reg := testRegistry(f)
	f.Fuzz(func(t *testing.T, endpoint string) {
		rt, err := reg.Resolve(endpoint)
		if err != nil {
			if !errors.Is(err, providers.ErrNotHTTPS) && !errors.Is(err, providers.ErrBadEndpoint) {
				t.Fatalf("error %v is neither ErrNotHTTPS nor ErrBadEndpoint", err)
			}
			if u, perr := url.Parse(endpoint); perr == nil && len(u.Path) >= 12 && strings.Contains(err.Error(), u.Path) {
				t.Fatalf("error %q quotes the endpoint path", err)
			}
			return
		}
		if rt.Provider == nil || rt.URL == nil || rt.Endpoint != endpoint {
			t.Fatalf("incomplete route %+v", rt)
		}
		if rt.Unknown != (rt.Provider == reg.Fallback()) {
			t.Fatalf("Unknown = %v for provider %s", rt.Unknown, rt.Provider.ID)
		}
		a := rt.Authority
		if a == "" || a != strings.ToLower(a) || strings.HasSuffix(a, ".") || strings.HasSuffix(a, ":443") {
			t.Fatalf("authority %q is not normalised", a)
		}
		again, err := reg.Resolve("https://" + a + "/")
		if err != nil || again.Authority != a || again.Provider != rt.Provider {
			t.Fatalf("re-resolving authority %q gave %q %v, %v", a, again.Authority, again.Provider, err)
		}
		if u, _ := url.Parse(endpoint); u.String() != rt.URL.String() {
			t.Fatalf("URL changed: %q, want %q", rt.URL.String(), u.String())
		}
	})
}
