package providers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

// withEntries is a registry of n entries: the fallback, then n-1 entries with a host each and
// the given extra lines.
func withEntries(n int, extra ...string) []byte {
	lines := []string{"version: 1", "providers:", fb}
	lines = append(lines, extra...)
	for i := 1; i < n; i++ {
		lines = append(lines, fmt.Sprintf("  - id: p%d", i), fmt.Sprintf("    hosts: [p%d.example]", i))
	}
	return doc(lines...)
}

// withHosts is a registry whose entry "a" (line 4) lists n hosts, one a line from line 6.
func withHosts(n int) []byte {
	lines := []string{"version: 1", "providers:", fb, "  - id: a", "    hosts:"}
	for i := range n {
		lines = append(lines, fmt.Sprintf("      - h%d.example", i))
	}
	return doc(lines...)
}

// inFlightEntries is a registry without a budget whose entries' max_in_flight are given.
func inFlightEntries(budget string, caps ...int) []byte {
	lines := []string{"version: 1"}
	if budget != "" {
		lines = append(lines, budget)
	}
	lines = append(lines, "providers:")
	for i, c := range caps {
		if i == 0 {
			lines = append(lines, fb, fmt.Sprintf("    max_in_flight: %d", c))
			continue
		}
		lines = append(lines, fmt.Sprintf("  - id: p%d", i), fmt.Sprintf("    hosts: [p%d.example]", i), fmt.Sprintf("    max_in_flight: %d", c))
	}
	return doc(lines...)
}

// setting is a registry whose fallback entry (line 3) sets these values, one a line from line 4.
func setting(lines ...string) []byte {
	d := []string{"version: 1", "providers:", fb}
	for _, l := range lines {
		d = append(d, "    "+l)
	}
	return doc(d...)
}

// section is a registry with one top-level line (line 2) before the fallback.
func section(line string) []byte { return doc("version: 1", line, "providers:", fb) }

// TestBounds: every setting has an upper bound the worker can honour (and the loops a lower
// one). A value at the bound loads; one past it is refused with the file, line and field, so
// `check` refuses what `run` could not run.
func TestBounds(t *testing.T) {
	tests := []struct {
		name     string
		at, over []byte
		want     string // "r.yaml:LINE: field: problem" (a prefix of the problem suffices)
	}{
		{"rate", setting("rate: 1000000"), setting("rate: 1000000.5"),
			"r.yaml:4: providers[0].rate: at most 1000000 requests per second for the whole fleet, got 1.0000005e+06"},
		{"burst", setting("burst: 100000"), setting("burst: 100001"),
			"r.yaml:4: providers[0].burst: at most 100000 requests at once for the whole fleet, got 100001"},
		{"max_in_flight", setting("max_in_flight: 10000"), setting("max_in_flight: 2000000000"),
			"r.yaml:4: providers[0].max_in_flight: at most 10000 per replica (run more replicas for more), got 2000000000"},
		{"min_in_flight", setting("max_in_flight: 10000", "min_in_flight: 10000"), setting("max_in_flight: 10000", "min_in_flight: 10001"),
			"r.yaml:5: providers[0].min_in_flight: at most 10000 per replica (run more replicas for more), got 10001"},
		{"per_recipient_in_flight", setting("per_recipient_in_flight: 10000"), setting("per_recipient_in_flight: 10001"),
			"r.yaml:4: providers[0].per_recipient_in_flight: at most 10000 per replica"},
		{"retry_share", setting("retry_share: 1"), setting("retry_share: 1.0001"),
			"r.yaml:4: providers[0].retry_share: must be more than 0 and at most 1, got 1.0001"},
		{"max_ttl", setting("max_ttl: 4838400s"), setting("max_ttl: 4838401s"),
			"r.yaml:4: providers[0].max_ttl: at most 4838400s"},
		{"timeout", setting("timeout: 5m"), setting("timeout: 5m1s"),
			"r.yaml:4: providers[0].timeout: at most 5m0s, got 5m1s"},
		{"connect_timeout", setting("timeout: 5m", "connect_timeout: 5m"), setting("timeout: 5m", "connect_timeout: 5m1s"),
			"r.yaml:5: providers[0].connect_timeout: at most 5m0s, got 5m1s"},
		{"tls_timeout", setting("timeout: 5m", "tls_timeout: 5m"), setting("timeout: 5m", "tls_timeout: 5m1s"),
			"r.yaml:5: providers[0].tls_timeout: at most 5m0s, got 5m1s"},
		{"response_header_timeout", setting("timeout: 5m", "response_header_timeout: 5m"), setting("timeout: 5m", "response_header_timeout: 5m1s"),
			"r.yaml:5: providers[0].response_header_timeout: at most 5m0s, got 5m1s"},
		{"vapid_lifetime", setting("vapid_lifetime: 24h"), setting("vapid_lifetime: 24h1s"),
			"r.yaml:4: providers[0].vapid_lifetime: at most 24h0m0s, got 24h0m1s"},
		{"vapid_lifetime below a minute", setting("vapid_lifetime: 1m"), setting("vapid_lifetime: 59s"),
			"r.yaml:4: providers[0].vapid_lifetime: at least 1m0s (a shorter token may expire on its way), got 59s"},
		{"breaker.failure_ratio", setting("breaker: {failure_ratio: 1}"), setting("breaker: {failure_ratio: 1.01}"),
			"r.yaml:4: providers[0].breaker.failure_ratio: must be more than 0 and at most 1, got 1.01"},
		{"breaker.window", setting("breaker: {window: 1h}"), setting("breaker: {window: 61m}"),
			"r.yaml:4: providers[0].breaker.window: at most 1h0m0s, got 1h1m0s"},
		{"breaker.min_samples", setting("breaker: {min_samples: 1000000}"), setting("breaker: {min_samples: 1000001}"),
			"r.yaml:4: providers[0].breaker.min_samples: at most 1000000 outcomes (a breaker needing more never opens), got 1000001"},
		{"breaker.min_samples past 32 bits", setting("breaker: {min_samples: 1000000}"), setting("breaker: {min_samples: 4294967297}"),
			"r.yaml:4: providers[0].breaker.min_samples: at most 1000000 outcomes"},
		{"breaker.cooldown", setting("breaker: {cooldown: 1h}"), setting("breaker: {cooldown: 3601s}"),
			"r.yaml:4: providers[0].breaker.cooldown: at most 1h0m0s, got 1h0m1s"},
		{"breaker.probes", setting("breaker: {probes: 100}"), setting("breaker: {probes: 101}"),
			"r.yaml:4: providers[0].breaker.probes: at most 100 requests (half-open lets about ten a second through), got 101"},
		{"a bound in defaults", doc("version: 1", "defaults:", "  max_in_flight: 10000", "providers:", fb),
			doc("version: 1", "defaults:", "  max_in_flight: 10001", "providers:", fb),
			"r.yaml:3: defaults.max_in_flight: at most 10000 per replica"},

		{"budget.total_in_flight", section("budget: {total_in_flight: 65536}"), section("budget: {total_in_flight: 65537}"),
			"r.yaml:2: budget.total_in_flight: at most 65536 per replica (run more replicas for more), got 65537"},
		{"budget.every", section("budget: {total_in_flight: 9, every: 1h}"), section("budget: {total_in_flight: 9, every: 1h1s}"),
			"r.yaml:2: budget.every: at most 1h0m0s, got 1h0m1s"},
		{"budget.every below 100ms", section("budget: {total_in_flight: 9, every: 100ms}"), section("budget: {total_in_flight: 9, every: 1ns}"),
			"r.yaml:2: budget.every: at least 100ms (a loop of every replica), got 1ns"},
		{"budget.half_life", section("budget: {total_in_flight: 9, half_life: 1h}"), section("budget: {total_in_flight: 9, half_life: 1h1s}"),
			"r.yaml:2: budget.half_life: at most 1h0m0s, got 1h0m1s"},
		{"host_breaker.failures", section("host_breaker: {failures: 100}"), section("host_breaker: {failures: 101}"),
			"r.yaml:2: host_breaker.failures: at most 100 in a row (such a host is down), got 101"},
		{"host_breaker.cooldown", section("host_breaker: {cooldown: 1h}"), section("host_breaker: {cooldown: 2h}"),
			"r.yaml:2: host_breaker.cooldown: at most 1h0m0s, got 2h0m0s"},
		{"host_breaker.max_hosts", section("host_breaker: {max_hosts: 65536}"), section("host_breaker: {max_hosts: 65537}"),
			"r.yaml:2: host_breaker.max_hosts: at most 65536 per replica, got 65537"},
		{"heartbeat.every", section("heartbeat: {every: 1m, stale_after: 2m}"), section("heartbeat: {every: 61s, stale_after: 10m}"),
			"r.yaml:2: heartbeat.every: at most 1m0s, got 1m1s"},
		{"heartbeat.every below 100ms", section("heartbeat: {every: 100ms}"), section("heartbeat: {every: 99ms}"),
			"r.yaml:2: heartbeat.every: at least 100ms (a loop of every replica), got 99ms"},
		{"heartbeat.stale_after", section("heartbeat: {stale_after: 10m}"), section("heartbeat: {stale_after: 601s}"),
			"r.yaml:2: heartbeat.stale_after: at most 10m0s, got 10m1s"},

		// Counts. Entry 64 (the 65th) starts on line 3 + 2*64 - 1 = 130.
		{"providers", withEntries(providers.MaxProviders), withEntries(providers.MaxProviders + 1),
			"r.yaml:130: providers: 65 entries; at most 64 (each holds a Redis connection per shard in every replica)"},
		{"hosts per provider", withHosts(providers.MaxHostsPerProvider), withHosts(providers.MaxHostsPerProvider + 1),
			"r.yaml:262: providers[1].hosts: 257 hosts; at most 256"},
		{"max_in_flight of all entries", inFlightEntries("", 10000, 10000, 10000, 10000, 10000, 10000, 5536),
			inFlightEntries("", 10000, 10000, 10000, 10000, 10000, 10000, 5537),
			"r.yaml:2: providers: the entries' max_in_flight add up to 65537; a replica holds at most 65536 requests in flight (lower them, or share a budget: total_in_flight)"},
		{"max_in_flight of all entries under a budget", inFlightEntries("budget: {total_in_flight: 65536}", 10000, 10000, 10000, 10000, 10000, 10000, 10000),
			inFlightEntries("budget: {total_in_flight: 65537}", 10000, 10000, 10000, 10000, 10000, 10000, 10000),
			"r.yaml:2: budget.total_in_flight: at most 65536 per replica"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := providers.Parse("r.yaml", tc.at); err != nil {
				t.Fatalf("at the bound: %v", err)
			}
			_, err := providers.Parse("r.yaml", tc.over)
			if err == nil {
				t.Fatalf("past the bound: Parse accepted it")
			}
			checkErrorShape(t, err)
			if !strings.Contains(err.Error()+"\n", tc.want) {
				t.Fatalf("past the bound: error text lacks %q; got:\n%s", tc.want, err)
			}
		})
	}
}

// TestBoundsReportedTogether: values past several bounds are all reported at once, each at its
// own line.
func TestBoundsReportedTogether(t *testing.T) {
	_, err := providers.Parse("r.yaml", doc("version: 1", "host_breaker: {max_hosts: 2000000}", "providers:", fb,
		"    max_in_flight: 2000000000", "    burst: 1000000", "    breaker: {min_samples: 5000000000, probes: 1000}"))
	if err == nil {
		t.Fatal("Parse accepted it")
	}
	checkErrorShape(t, err)
	for _, w := range []string{
		"r.yaml:2: host_breaker.max_hosts: at most 65536",
		"r.yaml:5: providers[0].max_in_flight: at most 10000",
		"r.yaml:6: providers[0].burst: at most 100000",
		"r.yaml:7: providers[0].breaker.min_samples: at most 1000000",
		"r.yaml:7: providers[0].breaker.probes: at most 100",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error text lacks %q; got:\n%s", w, err)
		}
	}
}
