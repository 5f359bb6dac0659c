package providers_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/doctest"
	"github.com/webpush-gateway/webpush-gateway/limits"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

// doc joins lines into a file, so a case's line numbers are its argument positions + 1.
func doc(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// shared settings the shipped file puts under defaults:.
var shippedShared = providers.Provider{
	Timeout:               10 * time.Second,
	ConnectTimeout:        5 * time.Second,
	TLSTimeout:            5 * time.Second,
	ResponseHeaderTimeout: 8 * time.Second,
	MinInFlight:           8,
	RetryShare:            0.5,
	BulkMinShare:          0.1,
	PerRecipientInFlight:  8,
	Breaker: limits.BreakerConfig{
		FailureRatio: 0.5, Window: 30 * time.Second, MinSamples: 20, Cooldown: 15 * time.Second, Probes: 3,
	},
}

func entry(id, kind string, hosts []string, maxTTL time.Duration, rate float64, burst, inFlight int) providers.Provider {
	p := shippedShared
	p.ID, p.Kind, p.Hosts, p.MaxTTL, p.Rate, p.Burst, p.MaxInFlight = id, kind, hosts, maxTTL, rate, burst, inFlight
	return p
}

func TestShippedRegistry(t *testing.T) {
	reg, err := providers.Load("../registry.yaml")
	if err != nil {
		t.Fatalf("Load(../registry.yaml): %v", err)
	}
	const fourWeeks, thirtyDays = 2419200 * time.Second, 2592000 * time.Second
	want := []providers.Provider{
		entry("fcm", "fcm", []string{"fcm.googleapis.com", "android.googleapis.com"}, fourWeeks, 2000, 400, 512),
		entry("autopush", "autopush", []string{"updates.push.services.mozilla.com", "push.services.mozilla.com"}, thirtyDays, 500, 100, 256),
		entry("apple", "apple", []string{"web.push.apple.com"}, fourWeeks, 300, 60, 128),
		entry("wns", "wns", []string{"notify.windows.com"}, fourWeeks, 300, 60, 128),
		entry("fallback", "generic", nil, fourWeeks, 100, 20, 64),
	}
	var got []providers.Provider
	for _, p := range reg.Providers() {
		got = append(got, *p)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shipped registry (-want +got):\n%s", diff)
	}
	if fb := reg.Fallback(); fb == nil || fb.ID != "fallback" {
		t.Errorf("Fallback() = %+v, want the fallback entry", fb)
	}
	for _, w := range want {
		p, ok := reg.Provider(w.ID)
		if !ok || p.ID != w.ID {
			t.Errorf("Provider(%q) = %v, %v; want the entry", w.ID, p, ok)
		}
	}
	if p, ok := reg.Provider("nope"); ok {
		t.Errorf("Provider(nope) = %v, true; want false", p)
	}
	// The fleet-wide sections: the shipped file spells out the built-in values and leaves
	// budget: commented out, so each replica uses max_in_flight.
	if b := reg.Budget(); b != nil {
		t.Errorf("Budget() = %+v, want nil (the shipped budget: is commented out)", b)
	}
	if d := cmp.Diff(limits.HostBreakerConfig{Failures: 3, Cooldown: 300 * time.Second, MaxHosts: 4096}, reg.HostBreaker()); d != "" {
		t.Errorf("HostBreaker() (-want +got):\n%s", d)
	}
	if d := cmp.Diff(providers.HeartbeatConfig{Every: time.Second, StaleAfter: 5 * time.Second}, reg.Heartbeat()); d != "" {
		t.Errorf("Heartbeat() (-want +got):\n%s", d)
	}
}

// The budget example commented out in the shipped file must load once uncommented.
func TestShippedBudgetExample(t *testing.T) {
	data, err := os.ReadFile("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(data), "# budget:\n#   total_in_flight: 768", "budget:\n  total_in_flight: 768", 1)
	s = strings.Replace(s, "#   every: 10s\n#   half_life: 60s", "  every: 10s\n  half_life: 60s", 1)
	if s == string(data) {
		t.Fatal("registry.yaml has no commented budget: example")
	}
	reg, err := providers.Parse("registry.yaml", []byte(s))
	if err != nil {
		t.Fatalf("the budget example does not load:\n%v", err)
	}
	want := &providers.Budget{TotalInFlight: 768, Every: 10 * time.Second, HalfLife: 60 * time.Second}
	if d := cmp.Diff(want, reg.Budget()); d != "" {
		t.Errorf("Budget() (-want +got):\n%s", d)
	}
}

func TestProvidersReturnsCopy(t *testing.T) {
	reg, err := providers.Load("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	list := reg.Providers()
	list[0] = nil
	if reg.Providers()[0] == nil {
		t.Error("Providers() returned the registry's own slice; writing to it changed the registry")
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, doc("version: 1", "providers: []"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := providers.Load(bad)
	if want := bad + ":2: providers: no entry with id: fallback"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load(bad) error = %v, want it to contain %q", err, want)
	}
	_, err = providers.Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want os.ErrNotExist", err)
	}
	var list providers.Errors
	if errors.As(err, &list) {
		t.Errorf("Load(missing) error is a Errors (%v); an unreadable file is not a registry problem", list)
	}
}

func TestParseValid(t *testing.T) {
	withShared := func(p providers.Provider, edit func(*providers.Provider)) providers.Provider {
		edit(&p)
		return p
	}
	builtin := providers.Provider{
		MaxTTL: 2419200 * time.Second, Rate: 100, Burst: 20, MaxInFlight: 64,
		Timeout: 10 * time.Second, ConnectTimeout: 5 * time.Second, TLSTimeout: 5 * time.Second,
		ResponseHeaderTimeout: 8 * time.Second,
		MinInFlight:           8, RetryShare: 0.5, BulkMinShare: 0.1, PerRecipientInFlight: 8,
		Breaker: limits.BreakerConfig{
			FailureRatio: 0.5, Window: 30 * time.Second, MinSamples: 20, Cooldown: 15 * time.Second, Probes: 3,
		},
	}
	tests := []struct {
		name string
		yaml []byte
		want []providers.Provider
	}{{
		name: "built-in defaults and kind from id",
		yaml: doc("version: 1", "providers:", "  - id: wns", "    hosts: [notify.windows.com]", "  - id: fallback"),
		want: []providers.Provider{
			withShared(builtin, func(p *providers.Provider) { p.ID, p.Kind, p.Hosts = "wns", "wns", []string{"notify.windows.com"} }),
			withShared(builtin, func(p *providers.Provider) { p.ID, p.Kind = "fallback", "generic" }),
		},
	}, {
		name: "self-hosted autopush sets its kind; other ids default to generic",
		yaml: doc("version: 1", "providers:",
			"  - id: acme-push", "    kind: autopush", "    hosts: [push.acme.example]",
			"  - id: forks", "    hosts: [push.fork.example.]",
			"  - id: fallback", "    hosts: []"),
		want: []providers.Provider{
			withShared(builtin, func(p *providers.Provider) {
				p.ID, p.Kind, p.Hosts = "acme-push", "autopush", []string{"push.acme.example"}
			}),
			withShared(builtin, func(p *providers.Provider) {
				p.ID, p.Kind, p.Hosts = "forks", "generic", []string{"push.fork.example"}
			}),
			withShared(builtin, func(p *providers.Provider) { p.ID, p.Kind = "fallback", "generic" }),
		},
	}, {
		name: "defaults merge field by field, breaker included, entries win",
		yaml: doc("version: 1",
			"defaults:",
			"  rate: 50",
			"  timeout: 20s",
			"  vapid_lifetime: 6h",
			"  breaker: {window: 1m, probes: 5}",
			"providers:",
			"  - id: fallback",
			"    rate: 7.5",
			"    max_ttl: 0s",
			"    breaker:",
			"      probes: 1",
			"      failure_ratio: 1"),
		want: []providers.Provider{withShared(builtin, func(p *providers.Provider) {
			p.ID, p.Kind, p.Rate, p.Timeout, p.VAPIDLifetime, p.MaxTTL = "fallback", "generic", 7.5, 20*time.Second, 6*time.Hour, 0
			p.Breaker.Window, p.Breaker.Probes, p.Breaker.FailureRatio = time.Minute, 1, 1
		})},
	}, {
		name: "empty sections and equal timeouts",
		yaml: doc("version: 1", "defaults:", "providers:", "  - id: fallback", "    breaker:",
			"    timeout: 5s", "    connect_timeout: 5s", "    tls_timeout: 5s", "    response_header_timeout: 5s"),
		want: []providers.Provider{withShared(builtin, func(p *providers.Provider) {
			p.ID, p.Kind = "fallback", "generic"
			p.Timeout, p.ConnectTimeout, p.TLSTimeout, p.ResponseHeaderTimeout = 5*time.Second, 5*time.Second, 5*time.Second, 5*time.Second
		})},
	}, {
		name: "in-flight settings from defaults and entries",
		yaml: doc("version: 1",
			"defaults:",
			"  retry_share: 0.25",
			"  per_recipient_in_flight: 0",
			"  min_in_flight: 2",
			"  bulk_min_share: 0.2",
			"providers:",
			"  - id: fallback",
			"    min_in_flight: 64",
			"    retry_share: 1",
			"    bulk_min_share: 0",
			"  - id: a",
			"    hosts: [a.example]",
			"    per_recipient_in_flight: 3"),
		want: []providers.Provider{
			withShared(builtin, func(p *providers.Provider) {
				p.ID, p.Kind, p.MinInFlight, p.RetryShare, p.PerRecipientInFlight = "fallback", "generic", 64, 1, 0
				p.BulkMinShare = 0
			}),
			withShared(builtin, func(p *providers.Provider) {
				p.ID, p.Kind, p.Hosts, p.MinInFlight, p.RetryShare, p.PerRecipientInFlight = "a", "generic", []string{"a.example"}, 2, 0.25, 3
				p.BulkMinShare = 0.2
			}),
		},
	}, {
		// Nobody set min_in_flight: the built-in floor 8 follows a smaller max_in_flight down
		// instead of refusing the file, and comes back for an entry with a larger one.
		name: "built-in floor follows a small max_in_flight",
		yaml: doc("version: 1", "defaults:", "  max_in_flight: 3", "providers:",
			"  - id: fallback", "  - id: a", "    hosts: [a.example]", "    max_in_flight: 100"),
		want: []providers.Provider{
			withShared(builtin, func(p *providers.Provider) { p.ID, p.Kind, p.MaxInFlight, p.MinInFlight = "fallback", "generic", 3, 3 }),
			withShared(builtin, func(p *providers.Provider) {
				p.ID, p.Kind, p.Hosts, p.MaxInFlight, p.MinInFlight = "a", "generic", []string{"a.example"}, 100, 8
			}),
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := providers.Parse("r.yaml", tc.yaml)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []providers.Provider
			for _, p := range reg.Providers() {
				got = append(got, *p)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("providers (-want +got):\n%s", diff)
			}
		})
	}
}

// registryDocYAML is the first yaml block of docs/registry.md after the line heading.
func registryDocYAML(t *testing.T, heading string) string {
	t.Helper()
	return doctest.MarkdownBlock(t, "../docs/registry.md", heading, "yaml")
}

// The self-hosted Autopush example in docs/registry.md must stay a valid entry.
func TestDocExample(t *testing.T) {
	block := registryDocYAML(t, "## Adding a self-hosted Autopush server")
	reg, err := providers.Parse("docs/registry.md", []byte("version: 1\n"+block))
	if err != nil {
		t.Fatalf("doc example does not load:\n%v", err)
	}
	p, ok := reg.Provider("example-autopush")
	if !ok || p.Kind != providers.KindAutopush {
		t.Fatalf("example entry = %+v, %v; want kind autopush", p, ok)
	}
	rt, err := reg.Resolve("https://eu.push.example.net/wpush/v2/gAAAA")
	if err != nil || rt.Provider != p {
		t.Errorf("Resolve(eu.push.example.net) = %+v, %v; want the example entry", rt.Provider, err)
	}
}

func TestProxySetting(t *testing.T) {
	reg, err := providers.Parse("r.yaml", []byte(`version: 1
defaults:
  proxy: http://Egress.example:3128
providers:
  - id: fallback
  - id: fcm
    hosts: [fcm.googleapis.com]
    proxy: none
  - id: apple
    hosts: [push.apple.com]
    proxy: https://other.example
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"fallback": "http://egress.example:3128", "fcm": providers.ProxyNone, "apple": "https://other.example:443"}
	for id, w := range want {
		if p, _ := reg.Provider(id); p.Proxy != w {
			got := p.Proxy
			t.Errorf("%s: proxy = %q, want %q", id, got, w)
		}
	}
}
