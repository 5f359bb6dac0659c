package providers_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

const fb = "  - id: fallback" // the minimal fallback entry most cases end with

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml []byte
		want []string // each must appear in the error text; "r.yaml:LINE: field: problem"
	}{
		// File as a whole.
		{"empty file", []byte(""), []string{"r.yaml:1: registry is empty"}},
		{"only comments", doc("# nothing here", "# yet"), []string{"r.yaml:1: registry is empty"}},
		{"empty document", doc("---"), []string{"r.yaml:1: registry is empty"}},
		{"two documents", doc("version: 1", "providers:", fb, "---", "version: 1"),
			[]string{"r.yaml:4: more than one YAML document"}},
		{"syntax error", doc("version: 1", "providers:", fb, "    rate: 5", "    burst 3"),
			[]string{"r.yaml:5: YAML syntax: could not find expected ':'"}},
		// An entry's key indented less than its siblings: the parser names the list's line (2);
		// the line to fix is the key's.
		{"indentation error", doc("version: 1", "providers:", "  - id: fcm", "    hosts: [fcm.googleapis.com]", "    rate: 100", "   max_in_flight: 10", fb),
			[]string{"r.yaml:6: YAML syntax: did not find expected '-' indicator"}},
		{"indentation error on the last line", doc("version: 1", "providers:", fb, "    rate: 100", "   burst: 10"),
			[]string{"r.yaml:5: YAML syntax: did not find expected '-' indicator"}},
		{"top level is a list", doc("- version: 1"), []string{"r.yaml:1: want a mapping with version: and providers:, got a list"}},
		{"file too large", []byte("version: 1\n" + strings.Repeat("#", providers.MaxFileSize)),
			[]string{"r.yaml:1: file is larger than 1048576 bytes"}},

		// version.
		{"missing version", doc("providers:", fb), []string{"r.yaml:1: version: required: write version: 1"}},
		{"unsupported version", doc("version: 2", "providers:", fb),
			[]string{"r.yaml:1: version: unsupported version 2 (this build reads version 1)"}},
		{"version as a string", doc(`version: "1"`, "providers:", fb), []string{`r.yaml:1: version: want a whole number, got "1"`}},

		// Keys.
		{"unknown entry key with suggestion", doc("version: 1", "providers:", fb, "    brust: 5"),
			[]string{"r.yaml:4: providers[0].brust: unknown field (did you mean burst?)"}},
		{"unknown key in camel case", doc("version: 1", "providers:", fb, "    maxInFlight: 5"),
			[]string{"r.yaml:4: providers[0].maxInFlight: unknown field (did you mean max_in_flight?)"}},
		{"unknown top key", doc("version: 1", "provider:", fb),
			[]string{"r.yaml:2: provider: unknown field (did you mean providers?)", "r.yaml:1: providers: required"}},
		{"unknown breaker key", doc("version: 1", "providers:", fb, "    breaker:", "      cooldwn: 5s"),
			[]string{"r.yaml:5: providers[0].breaker.cooldwn: unknown field (did you mean cooldown?)"}},
		{"unknown key without suggestion", doc("version: 1", "providers:", fb, "    colour: blue"),
			[]string{"r.yaml:4: providers[0].colour: unknown field\n"}},
		{"duplicate key in an entry", doc("version: 1", "providers:", fb, "    rate: 5", "    rate: 6"),
			[]string{"r.yaml:5: providers[0].rate: duplicate key (first at line 4)"}},
		{"duplicate top key", doc("version: 1", "providers:", fb, "version: 1"),
			[]string{"r.yaml:4: version: duplicate key (first at line 1)"}},
		{"alias", doc("version: 1", "defaults:", "  rate: &r 5", "providers:", fb, "    burst: *r"),
			[]string{"r.yaml:6: providers[0].burst: YAML aliases are not supported"}},
		{"merge key", doc("version: 1", "providers:", fb, "    <<: {rate: 5}"),
			[]string{"r.yaml:4: providers[0].<<: YAML merge keys are not supported"}},
		{"id in defaults", doc("version: 1", "defaults:", "  id: x", "providers:", fb),
			[]string{"r.yaml:3: defaults.id: every entry names its own id"}},
		{"hosts in defaults", doc("version: 1", "defaults:", "  hosts: [a.example]", "providers:", fb),
			[]string{"r.yaml:3: defaults.hosts: a host belongs to one entry"}},
		{"kind in defaults", doc("version: 1", "defaults:", "  kind: fcm", "providers:", fb),
			[]string{"r.yaml:3: defaults.kind: kind cannot be a default"}},

		// Types.
		{"duration in words", doc("version: 1", "providers:", fb, "    timeout: ten"),
			[]string{`r.yaml:4: providers[0].timeout: want a duration like 10s, got "ten"`}},
		{"duration without unit", doc("version: 1", "providers:", fb, "    max_ttl: 2419200"),
			[]string{"r.yaml:4: providers[0].max_ttl: want a duration like 10s, got 2419200 (no unit: write 2419200s)"}},
		{"duration left empty", doc("version: 1", "providers:", fb, "    cooldown:", "    breaker: {window: }"),
			[]string{"r.yaml:4: providers[0].cooldown: unknown field", "r.yaml:5: providers[0].breaker.window: want a duration like 10s, got nothing"}},
		{"rate in words", doc("version: 1", "providers:", fb, "    rate: fast"),
			[]string{`r.yaml:4: providers[0].rate: want a number, got "fast"`}},
		{"rate not finite", doc("version: 1", "providers:", fb, "    rate: .inf"),
			[]string{"r.yaml:4: providers[0].rate: want a finite number, got .inf"}},
		{"burst fractional", doc("version: 1", "providers:", fb, "    burst: 1.5"),
			[]string{"r.yaml:4: providers[0].burst: want a whole number, got 1.5"}},
		{"in-flight as a list", doc("version: 1", "providers:", fb, "    max_in_flight: [1]"),
			[]string{"r.yaml:4: providers[0].max_in_flight: want a whole number, got a list"}},
		{"breaker not a mapping", doc("version: 1", "providers:", fb, "    breaker: on"),
			[]string{`r.yaml:4: providers[0].breaker: want a mapping, got "on"`}},
		{"providers not a list", doc("version: 1", "providers: fallback"),
			[]string{`r.yaml:2: providers: want a list of entries, got "fallback"`}},
		{"entry not a mapping", doc("version: 1", "providers:", "  - fallback", fb),
			[]string{`r.yaml:3: providers[0]: want a mapping with id:, hosts: and settings, got "fallback"`}},
		{"id not a string", doc("version: 1", "providers:", fb, "  - id: 42", "    hosts: [a.example]"),
			[]string{"r.yaml:4: providers[1].id: want a string, got 42"}},

		// Impossible values.
		{"rate zero", doc("version: 1", "providers:", fb, "    rate: 0"),
			[]string{"r.yaml:4: providers[0].rate: must be more than 0 requests per second, got 0"}},
		{"rate negative", doc("version: 1", "providers:", fb, "    rate: -2.5"),
			[]string{"r.yaml:4: providers[0].rate: must be more than 0 requests per second, got -2.5"}},
		{"burst zero", doc("version: 1", "providers:", fb, "    burst: 0"),
			[]string{"r.yaml:4: providers[0].burst: must be at least 1, got 0"}},
		{"in-flight zero", doc("version: 1", "providers:", fb, "    max_in_flight: 0"),
			[]string{"r.yaml:4: providers[0].max_in_flight: must be at least 1, got 0"}},
		{"failure ratio zero", doc("version: 1", "providers:", fb, "    breaker: {failure_ratio: 0}"),
			[]string{"r.yaml:4: providers[0].breaker.failure_ratio: must be more than 0 and at most 1, got 0"}},
		{"failure ratio above one", doc("version: 1", "providers:", fb, "    breaker:", "      failure_ratio: 1.5"),
			[]string{"r.yaml:5: providers[0].breaker.failure_ratio: must be more than 0 and at most 1, got 1.5"}},
		{"probes zero", doc("version: 1", "providers:", fb, "    breaker: {probes: 0}"),
			[]string{"r.yaml:4: providers[0].breaker.probes: must be at least 1, got 0"}},
		{"min samples zero", doc("version: 1", "providers:", fb, "    breaker: {min_samples: 0}"),
			[]string{"r.yaml:4: providers[0].breaker.min_samples: must be at least 1, got 0"}},
		{"window zero and cooldown too long", doc("version: 1", "providers:", fb, "    breaker: {window: 0s, cooldown: 2h}"),
			[]string{"r.yaml:4: providers[0].breaker.window: must be more than 0, got 0s",
				"r.yaml:4: providers[0].breaker.cooldown: at most 1h0m0s, got 2h0m0s"}},
		{"proxy not a URL", doc("version: 1", "providers:", fb, "    proxy: socks5://p.example:1080"),
			[]string{"r.yaml:4: providers[0].proxy: want an http:// or https:// proxy URL"}},
		{"proxy with a path", doc("version: 1", "providers:", fb, "    proxy: http://p.example:3128/x"),
			[]string{"r.yaml:4: providers[0].proxy: a proxy URL is scheme://host:port only, with no path or query"}},
		{"proxy with credentials, never echoed", doc("version: 1", "defaults:", "  proxy: http://u:s3cret@p.example:3128", "providers:", fb),
			[]string{"r.yaml:3: defaults.proxy: credentials do not belong in the registry; give them to the worker with --proxy-credentials-file"}},
		{"proxy not a string", doc("version: 1", "providers:", fb, "    proxy: 3128"),
			[]string{"r.yaml:4: providers[0].proxy: want a proxy URL (http://host:port) or none, got 3128"}},
		{"timeout zero", doc("version: 1", "providers:", fb, "    timeout: 0s"),
			[]string{"r.yaml:4: providers[0].timeout: must be more than 0, got 0s"}},
		{"connect timeout negative", doc("version: 1", "providers:", fb, "    connect_timeout: -1s"),
			[]string{"r.yaml:4: providers[0].connect_timeout: must be more than 0, got -1s"}},
		{"timeout absurd", doc("version: 1", "providers:", fb, "    timeout: 1h"),
			[]string{"r.yaml:4: providers[0].timeout: at most 5m0s, got 1h0m0s"}},
		{"connect timeout over timeout", doc("version: 1", "providers:", fb, "    timeout: 3s", "    connect_timeout: 4s"),
			[]string{"r.yaml:5: providers[0].connect_timeout: 4s is longer than timeout (3s)"}},
		{"tls timeout over a default timeout", doc("version: 1", "defaults:", "  timeout: 6s", "providers:", fb, "    tls_timeout: 7s"),
			[]string{"r.yaml:6: providers[0].tls_timeout: 7s is longer than timeout (6s, from defaults)"}},
		{"entry timeout under built-in header timeout", doc("version: 1", "providers:", fb, "    timeout: 6s"),
			[]string{"r.yaml:4: providers[0].timeout: 6s is shorter than response_header_timeout (8s, the built-in default)"}},
		{"bad default reported once", doc("version: 1", "defaults:", "  burst: 0", "providers:", fb, "  - id: a", "    hosts: [a.example]"),
			[]string{"r.yaml:3: defaults.burst: must be at least 1, got 0"}},
		{"max ttl negative", doc("version: 1", "providers:", fb, "    max_ttl: -1s"),
			[]string{"r.yaml:4: providers[0].max_ttl: must not be negative, got -1s"}},
		{"max ttl absurd", doc("version: 1", "providers:", fb, "    max_ttl: 5000000s"),
			[]string{"r.yaml:4: providers[0].max_ttl: at most 4838400s (no push service keeps a message that long), got 5000000s"}},
		{"vapid lifetime over a day", doc("version: 1", "providers:", fb, "    vapid_lifetime: 25h"),
			[]string{"r.yaml:4: providers[0].vapid_lifetime: at most 24h0m0s, got 25h0m0s"}},
		{"vapid lifetime zero", doc("version: 1", "providers:", fb, "    vapid_lifetime: 0s"),
			[]string{"r.yaml:4: providers[0].vapid_lifetime: must be more than 0, got 0s"}},

		// In-flight settings.
		{"retry share zero", doc("version: 1", "providers:", fb, "    retry_share: 0"),
			[]string{"r.yaml:4: providers[0].retry_share: must be more than 0 and at most 1, got 0"}},
		{"retry share above one", doc("version: 1", "defaults:", "  retry_share: 1.5", "providers:", fb),
			[]string{"r.yaml:3: defaults.retry_share: must be more than 0 and at most 1, got 1.5"}},
		{"bulk share above half", doc("version: 1", "providers:", fb, "    bulk_min_share: 0.6"),
			[]string{"r.yaml:4: providers[0].bulk_min_share: must be at least 0 and at most 0.5 (more would put bulk before transactional jobs), got 0.6"}},
		{"bulk share negative", doc("version: 1", "defaults:", "  bulk_min_share: -0.1", "providers:", fb),
			[]string{"r.yaml:3: defaults.bulk_min_share: must be at least 0 and at most 0.5 (more would put bulk before transactional jobs), got -0.1"}},
		{"retry share as a percentage", doc("version: 1", "providers:", fb, "    retry_share: 50%"),
			[]string{`r.yaml:4: providers[0].retry_share: want a number, got "50%"`}},
		{"retry share in camel case", doc("version: 1", "providers:", fb, "    retryShare: 0.5"),
			[]string{"r.yaml:4: providers[0].retryShare: unknown field (did you mean retry_share?)"}},
		{"per-recipient cap negative", doc("version: 1", "providers:", fb, "    per_recipient_in_flight: -1"),
			[]string{"r.yaml:4: providers[0].per_recipient_in_flight: must be at least 0, got -1"}},
		{"per-recipient cap fractional", doc("version: 1", "providers:", fb, "    per_recipient_in_flight: 2.5"),
			[]string{"r.yaml:4: providers[0].per_recipient_in_flight: want a whole number, got 2.5"}},
		{"min in flight zero", doc("version: 1", "providers:", fb, "    min_in_flight: 0"),
			[]string{"r.yaml:4: providers[0].min_in_flight: must be at least 1, got 0"}},
		{"min in flight over max in the entry", doc("version: 1", "providers:", fb, "    max_in_flight: 4", "    min_in_flight: 10"),
			[]string{"r.yaml:5: providers[0].min_in_flight: 10 is more than max_in_flight (4)"}},
		{"entry max in flight under a default min", doc("version: 1", "defaults:", "  min_in_flight: 8", "providers:", fb, "    max_in_flight: 4"),
			[]string{"r.yaml:6: providers[0].max_in_flight: 4 is less than min_in_flight (8, from defaults)"}},
		{"entry min in flight over the built-in max", doc("version: 1", "providers:", fb, "    min_in_flight: 65"),
			[]string{"r.yaml:4: providers[0].min_in_flight: 65 is more than max_in_flight (64, the built-in default)"}},
		{"min over max inside defaults reported once", doc("version: 1", "defaults:", "  max_in_flight: 2", "  min_in_flight: 3", "providers:", fb, "  - id: a", "    hosts: [a.example]"),
			[]string{"r.yaml:4: defaults.min_in_flight: 3 is more than max_in_flight (2)\n"}},

		// budget:, host_breaker:, heartbeat:.
		{"budget without a total", doc("version: 1", "budget:", "  every: 5s", "providers:", fb),
			[]string{"r.yaml:2: budget.total_in_flight: required"}},
		{"budget left empty", doc("version: 1", "budget:", "providers:", fb),
			[]string{"r.yaml:2: budget.total_in_flight: required"}},
		{"budget not a mapping", doc("version: 1", "budget: 100", "providers:", fb),
			[]string{"r.yaml:2: budget: want a mapping, got 100", "r.yaml:2: budget.total_in_flight: required"}},
		{"budget total zero", doc("version: 1", "budget: {total_in_flight: 0}", "providers:", fb),
			[]string{"r.yaml:2: budget.total_in_flight: must be at least 1, got 0"}},
		{"budget total under the provider count", doc("version: 1", "budget:", "  total_in_flight: 1", "providers:", fb, "  - id: a", "    hosts: [a.example]"),
			[]string{"r.yaml:3: budget.total_in_flight: 1 is less than the number of providers (2): each needs at least one request in flight"}},
		{"budget periods", doc("version: 1", "budget:", "  total_in_flight: 100", "  every: 0s", "  half_life: 60", "providers:", fb),
			[]string{"r.yaml:4: budget.every: must be more than 0, got 0s", "r.yaml:5: budget.half_life: want a duration like 10s, got 60 (no unit: write 60s)"}},
		{"budget half life too long", doc("version: 1", "budget: {total_in_flight: 100, half_life: 2h}", "providers:", fb),
			[]string{"r.yaml:2: budget.half_life: at most 1h0m0s, got 2h0m0s"}},
		{"budget key misspelt", doc("version: 1", "budget:", "  total_inflight: 100", "providers:", fb),
			[]string{"r.yaml:3: budget.total_inflight: unknown field (did you mean total_in_flight?)", "r.yaml:2: budget.total_in_flight: required"}},
		{"budget at entry level", doc("version: 1", "providers:", fb, "    budget: {total_in_flight: 9}"),
			[]string{"r.yaml:4: providers[0].budget: unknown field"}},
		{"host breaker values", doc("version: 1", "host_breaker:", "  failures: 0", "  cooldown: 2h", "  max_hosts: 0", "providers:", fb),
			[]string{"r.yaml:3: host_breaker.failures: must be at least 1, got 0", "r.yaml:4: host_breaker.cooldown: at most 1h0m0s, got 2h0m0s",
				"r.yaml:5: host_breaker.max_hosts: must be at least 1, got 0"}},
		{"host breaker key misspelt", doc("version: 1", "host_breaker: {max_host: 10}", "providers:", fb),
			[]string{"r.yaml:2: host_breaker.max_host: unknown field (did you mean max_hosts?)"}},
		{"host breaker misspelt at top", doc("version: 1", "hostbreaker: {failures: 3}", "providers:", fb),
			[]string{"r.yaml:2: hostbreaker: unknown field (did you mean host_breaker?)"}},
		{"heartbeat stale after under two beats", doc("version: 1", "heartbeat:", "  stale_after: 1500ms", "providers:", fb),
			[]string{"r.yaml:3: heartbeat.stale_after: 1.5s is less than twice every (1s, the built-in default): one late heartbeat would drop a live replica"}},
		{"heartbeat every over half the built-in stale after", doc("version: 1", "heartbeat:", "  every: 3s", "providers:", fb),
			[]string{"r.yaml:3: heartbeat.every: 3s is more than half of stale_after (5s, the built-in default)"}},
		{"heartbeat both set and inconsistent", doc("version: 1", "heartbeat: {every: 2s, stale_after: 3s}", "providers:", fb),
			[]string{"r.yaml:2: heartbeat.stale_after: 3s is less than twice every (2s): one late heartbeat"}},
		{"heartbeat every zero", doc("version: 1", "heartbeat: {every: 0s}", "providers:", fb),
			[]string{"r.yaml:2: heartbeat.every: must be more than 0, got 0s"}},
		{"fleet sections checked without providers", doc("version: 1", "budget: {total_in_flight: 0}", "heartbeat: {every: soon}"),
			[]string{"r.yaml:1: providers: required", "r.yaml:2: budget.total_in_flight: must be at least 1", `r.yaml:3: heartbeat.every: want a duration like 10s, got "soon"`}},

		// Ids and kinds.
		{"missing id", doc("version: 1", "providers:", fb, "  - hosts: [a.example]"),
			[]string{"r.yaml:4: providers[1].id: required"}},
		{"upper-case id", doc("version: 1", "providers:", fb, "  - id: FCM", "    hosts: [a.example]"),
			[]string{`r.yaml:4: providers[1].id: want a lower-case letter then up to 31 of a-z, 0-9, '_', '-', got "FCM"`}},
		{"id starting with a digit", doc("version: 1", "providers:", fb, "  - id: 1push", "    hosts: [a.example]"),
			[]string{`r.yaml:4: providers[1].id: want a lower-case letter`}},
		{"id too long", doc("version: 1", "providers:", fb, "  - id: a"+strings.Repeat("b", 32), "    hosts: [a.example]"),
			[]string{`r.yaml:4: providers[1].id: want a lower-case letter`}},
		{"duplicate id", doc("version: 1", "providers:", fb, "  - id: fcm", "    hosts: [a.example]", "  - id: fcm", "    hosts: [b.example]"),
			[]string{`r.yaml:6: providers[2].id: duplicate id "fcm" (first at line 4)`}},
		{"unknown kind", doc("version: 1", "providers:", fb, "  - id: g", "    kind: gcm", "    hosts: [a.example]"),
			[]string{`r.yaml:5: providers[1].kind: unknown kind "gcm" (did you mean fcm? want one of fcm, autopush, apple, wns, generic)`}},
		{"missing fallback", doc("version: 1", "providers:", "  - id: fcm", "    hosts: [fcm.googleapis.com]"),
			[]string{"r.yaml:2: providers: no entry with id: fallback"}},
		{"empty providers", doc("version: 1", "providers: []"), []string{"r.yaml:2: providers: no entry with id: fallback"}},
		{"duplicate fallback", doc("version: 1", "providers:", fb, fb),
			[]string{`r.yaml:4: providers[1].id: duplicate id "fallback" (first at line 3)`}},

		// Hosts.
		{"fallback with hosts", doc("version: 1", "providers:", fb, "    hosts: [a.example]"),
			[]string{"r.yaml:4: providers[0].hosts: the fallback takes every host no other entry lists; it cannot list hosts"}},
		{"no hosts", doc("version: 1", "providers:", fb, "  - id: wns"),
			[]string{"r.yaml:4: providers[1].hosts: required: list the host names this provider serves"}},
		{"empty hosts", doc("version: 1", "providers:", fb, "  - id: wns", "    hosts: []"),
			[]string{"r.yaml:5: providers[1].hosts: empty: list the host names this provider serves"}},
		{"hosts not a list", doc("version: 1", "providers:", fb, "  - id: wns", "    hosts: notify.windows.com"),
			[]string{`r.yaml:5: providers[1].hosts: want a list of host names, got "notify.windows.com"`}},
		{"host under two providers", doc("version: 1", "providers:", fb,
			"  - id: fcm", "    hosts: [fcm.googleapis.com]",
			"  - id: other", "    hosts:", "      - a.example", "      - fcm.googleapis.com."),
			[]string{"r.yaml:9: providers[2].hosts[1]: host fcm.googleapis.com is already listed under fcm (line 5)"}},
		{"host twice in one entry", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: [a.example, a.example]"),
			[]string{"r.yaml:5: providers[1].hosts[1]: host a.example is already listed under a (line 5)"}},
		{"host as a URL", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: [https://Push.Example/x]"),
			[]string{"r.yaml:5: providers[1].hosts[0]: want a bare host name, not a URL: write push.example"}},
		{"host with a path", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: [push.example/wpush]"),
			[]string{"r.yaml:5: providers[1].hosts[0]: want a bare host name, without a path"}},
		{"host with a port", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: ['push.example:8443']"),
			[]string{"r.yaml:5: providers[1].hosts[0]: want a bare host name, without a port"}},
		{"host with a wildcard", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: ['*.notify.windows.com']"),
			[]string{"r.yaml:5: providers[1].hosts[0]: wildcards are not supported (a host already matches all its subdomains): write notify.windows.com"}},
		{"host in upper case", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: [Push.Example]"),
			[]string{"r.yaml:5: providers[1].hosts[0]: host names are written in lower case: write push.example"}},
		{"host is an IP", doc("version: 1", "providers:", fb, "  - id: a", "    hosts: [10.0.0.1]"),
			[]string{"r.yaml:5: providers[1].hosts[0]: want a DNS name, not an IP address"}},
		{"host with bad labels", doc("version: 1", "providers:", fb, "  - id: a",
			"    hosts:", "      - -a.example", "      - a..example", "      - a_b.example", "      - ''", "      - 7"),
			[]string{"r.yaml:6: providers[1].hosts[0]: not a valid DNS name", "r.yaml:7: providers[1].hosts[1]: not a valid DNS name",
				"r.yaml:8: providers[1].hosts[2]: not a valid DNS name", "r.yaml:9: providers[1].hosts[3]: empty host name",
				"r.yaml:10: providers[1].hosts[4]: want a string, got 7"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := providers.Parse("r.yaml", tc.yaml)
			if err == nil {
				t.Fatalf("Parse succeeded (%d providers); want errors %q", len(reg.Providers()), tc.want)
			}
			if reg != nil {
				t.Errorf("Parse returned a registry alongside the error")
			}
			text := err.Error() + "\n"
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error text lacks %q; got:\n%s", w, text)
				}
			}
			checkErrorShape(t, err)
		})
	}
}

// A problem inherited from defaults: is reported once, under defaults, not once per entry.
func TestDefaultsProblemsReportedOnce(t *testing.T) {
	_, err := providers.Parse("r.yaml", doc("version: 1", "defaults:", "  timeout: 7s", "  burst: 0",
		"providers:", fb, "  - id: a", "    hosts: [a.example]"))
	want := "r.yaml:3: defaults.timeout: 7s is shorter than response_header_timeout (8s, the built-in default)\n" +
		"r.yaml:4: defaults.burst: must be at least 1, got 0"
	if err == nil {
		t.Fatal("Parse succeeded; want errors")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestAllErrorsReportedTogether(t *testing.T) {
	_, err := providers.Parse("registry.yaml", doc(
		"version: 3",
		"providers:",
		"  - id: fcm",
		"    hosts: [fcm.googleapis.com]",
		"    rate: 0",
		"    brust: 10",
		"  - id: wns",
		"    hosts: ['*.notify.windows.com', fcm.googleapis.com]",
		"    breaker: {failure_ratio: 2, probes: 0}",
	))
	want := providers.Errors{
		{File: "registry.yaml", Line: 1, Field: "version", Problem: "unsupported version 3 (this build reads version 1)"},
		{File: "registry.yaml", Line: 2, Field: "providers", Problem: "no entry with id: fallback (endpoints on hosts no entry lists need one; give it kind: generic and no hosts)"},
		{File: "registry.yaml", Line: 5, Field: "providers[0].rate", Problem: "must be more than 0 requests per second, got 0"},
		{File: "registry.yaml", Line: 6, Field: "providers[0].brust", Problem: "unknown field (did you mean burst?)"},
		{File: "registry.yaml", Line: 8, Field: "providers[1].hosts[0]", Problem: "wildcards are not supported (a host already matches all its subdomains): write notify.windows.com"},
		{File: "registry.yaml", Line: 8, Field: "providers[1].hosts[1]", Problem: "host fcm.googleapis.com is already listed under fcm (line 4)"},
		{File: "registry.yaml", Line: 9, Field: "providers[1].breaker.failure_ratio", Problem: "must be more than 0 and at most 1, got 2"},
		{File: "registry.yaml", Line: 9, Field: "providers[1].breaker.probes", Problem: "must be at least 1, got 0"},
	}
	var got providers.Errors
	if !errors.As(err, &got) {
		t.Fatalf("error %v (%T) is not a providers.Errors", err, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	wantText := "registry.yaml:1: version: unsupported version 3 (this build reads version 1)\n" +
		"registry.yaml:2: providers: no entry with id: fallback (endpoints on hosts no entry lists need one; give it kind: generic and no hosts)\n" +
		"registry.yaml:5: providers[0].rate: must be more than 0 requests per second, got 0\n" +
		"registry.yaml:6: providers[0].brust: unknown field (did you mean burst?)\n" +
		"registry.yaml:8: providers[1].hosts[0]: wildcards are not supported (a host already matches all its subdomains): write notify.windows.com\n" +
		"registry.yaml:8: providers[1].hosts[1]: host fcm.googleapis.com is already listed under fcm (line 4)\n" +
		"registry.yaml:9: providers[1].breaker.failure_ratio: must be more than 0 and at most 1, got 2\n" +
		"registry.yaml:9: providers[1].breaker.probes: must be at least 1, got 0"
	if diff := cmp.Diff(wantText, err.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
	var first *providers.Error
	if !errors.As(err, &first) || first.Line != 1 || first.Field != "version" {
		t.Errorf("errors.As(*Error) = %+v, want the first item", first)
	}
	if !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false")
	}
}

var errorLine = regexp.MustCompile(`^r\.yaml:[1-9][0-9]*: `)

// checkErrorShape asserts the contract every Parse error keeps: a Errors of *Error with a line,
// matching ErrInvalid, printed one "file:line: ..." per line.
func checkErrorShape(t *testing.T, err error) {
	t.Helper()
	var list providers.Errors
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error %v (%T) is not a non-empty providers.Errors", err, err)
	}
	if !errors.Is(err, providers.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(list) {
		t.Errorf("Error() has %d lines for %d problems:\n%s", len(lines), len(list), err)
	}
	for i, l := range lines {
		if !errorLine.MatchString(l) {
			t.Errorf("line %d of Error() is not file:line: ...: %q", i, l)
		}
	}
	for i := 1; i < len(list); i++ {
		if list[i].Line < list[i-1].Line {
			t.Errorf("problems out of line order: %d after %d", list[i].Line, list[i-1].Line)
		}
	}
}
