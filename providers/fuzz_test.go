package providers_test

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// FuzzParse: Parse never panics and returns either a usable registry or a Errors whose every item
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
		// At and past the bounds.
		"version: 1\nbudget: {total_in_flight: 65536, every: 100ms, half_life: 1h}\nhost_breaker: {failures: 100, cooldown: 1h, max_hosts: 65536}\nheartbeat: {every: 1m, stale_after: 10m}\n" +
			"providers:\n  - {id: fallback, rate: 1000000, burst: 100000, max_in_flight: 10000, min_in_flight: 10000, per_recipient_in_flight: 10000, vapid_lifetime: 1m, breaker: {min_samples: 1000000, probes: 100, window: 1h, cooldown: 1h}}\n",
		"version: 1\nbudget: {total_in_flight: 65537, every: 99ms}\nhost_breaker: {failures: 101, max_hosts: 65537}\nheartbeat: {every: 99ms}\n" +
			"providers:\n  - {id: fallback, rate: 1000001, burst: 100001, max_in_flight: 2000000000, per_recipient_in_flight: 10001, vapid_lifetime: 59s, breaker: {min_samples: 4294967297, probes: 101}}\n",
		"version: 1\nproviders:\n  - {id: fallback, max_in_flight: 10000}\n  - {id: a, hosts: [a.example], max_in_flight: 10000}\n  - {id: b, hosts: [b.example], max_in_flight: 10000}\n" +
			"  - {id: c, hosts: [c.example], max_in_flight: 10000}\n  - {id: d, hosts: [d.example], max_in_flight: 10000}\n  - {id: e, hosts: [e.example], max_in_flight: 10000}\n  - {id: f, hosts: [f.example], max_in_flight: 10000}\n",
	} {
		f.Add([]byte(s))
	}
	many := []string{"version: 1", "providers:", "  - id: fallback"}
	for i := range providers.MaxProviders {
		many = append(many, fmt.Sprintf("  - {id: p%d, hosts: [p%d.example]}", i, i))
	}
	f.Add([]byte(strings.Join(many, "\n")))
	hosts := []string{"version: 1", "providers:", "  - id: fallback", "  - id: a", "    hosts:"}
	for i := range providers.MaxHostsPerProvider + 1 {
		hosts = append(hosts, fmt.Sprintf("      - h%d.example", i))
	}
	f.Add([]byte(strings.Join(hosts, "\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := providers.Parse("f.yaml", data)
		if (reg == nil) == (err == nil) {
			t.Fatalf("Parse returned registry %v and error %v; want exactly one", reg, err)
		}
		if err != nil {
			var list providers.Errors
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty Errors", err, err)
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
		list := reg.Providers()
		if len(list) > providers.MaxProviders {
			t.Fatalf("accepted %d providers", len(list))
		}
		b := reg.Budget()
		if b != nil && (b.TotalInFlight < len(list) || b.TotalInFlight > providers.MaxTotalInFlight ||
			b.Every < 100*time.Millisecond || b.Every > time.Hour || b.HalfLife <= 0 || b.HalfLife > time.Hour) {
			t.Fatalf("accepted an impossible budget %+v", b)
		}
		if hb := reg.HostBreaker(); hb.Failures < 1 || hb.Failures > 100 || hb.Cooldown <= 0 || hb.Cooldown > time.Hour ||
			hb.MaxHosts < 1 || hb.MaxHosts > providers.MaxTrackedHosts {
			t.Fatalf("accepted an impossible host breaker %+v", hb)
		}
		if beat := reg.Heartbeat(); beat.Every < 100*time.Millisecond || beat.Every > time.Minute ||
			beat.StaleAfter < 2*beat.Every || beat.StaleAfter > 10*time.Minute {
			t.Fatalf("accepted an impossible heartbeat %+v", beat)
		}
		sumInFlight := 0
		for _, p := range list {
			sumInFlight += p.MaxInFlight
			if p.MinInFlight < 1 || p.MinInFlight > p.MaxInFlight || p.MaxInFlight > providers.MaxInFlight ||
				p.RetryShare <= 0 || p.RetryShare > 1 || p.PerRecipientInFlight < 0 || p.PerRecipientInFlight > providers.MaxInFlight {
				t.Fatalf("accepted impossible in-flight settings %+v", p)
			}
			if p.Rate <= 0 || p.Rate > 1e6 || p.Burst < 1 || p.Burst > 100_000 || p.MaxInFlight < 1 ||
				p.Timeout <= 0 || p.Timeout > 5*time.Minute || p.ConnectTimeout > p.Timeout || p.TLSTimeout > p.Timeout ||
				p.ResponseHeaderTimeout > p.Timeout || p.MaxTTL < 0 || p.MaxTTL > 4838400*time.Second ||
				p.VAPIDLifetime != 0 && (p.VAPIDLifetime < time.Minute || p.VAPIDLifetime > 24*time.Hour) ||
				len(p.Hosts) > providers.MaxHostsPerProvider {
				t.Fatalf("accepted an impossible entry %+v", p)
			}
			if br := p.Breaker; br.FailureRatio <= 0 || br.FailureRatio > 1 || br.Probes < 1 || br.Probes > 100 ||
				br.MinSamples < 1 || br.MinSamples > 1_000_000 || br.Window <= 0 || br.Window > time.Hour ||
				br.Cooldown <= 0 || br.Cooldown > time.Hour {
				t.Fatalf("accepted an impossible breaker %+v", br)
			}
			for _, h := range p.Hosts {
				rt, err := reg.Resolve("https://" + h + "/x")
				if err != nil || rt.Provider != p {
					t.Fatalf("host %q of %s resolves to %v, %v", h, p.ID, rt.Provider, err)
				}
			}
		}
		if b == nil && sumInFlight > providers.MaxTotalInFlight {
			t.Fatalf("accepted max_in_flight adding up to %d without a budget", sumInFlight)
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
