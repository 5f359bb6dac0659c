package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestEveryRefusedValueExits2NamingTheFlag: each command, given a value it refuses, exits 2 with
// a message that names the flag (or the argument) and the problem, and the usage line.
func TestEveryRefusedValueExits2NamingTheFlag(t *testing.T) {
	const r = "redis://127.0.0.1:1/0"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--shards", "0"}, "--shards must be 1 to 1024, got 0"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--gogc", "5"}, "--gogc must be at least 10"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--log-level", "loud"}, "--log-level: "},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--grace", "abc"}, `--grace: invalid value "abc"`},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem"}, "--subject is required"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--grace", "-5s"}, "--grace must be more than 0, got -5s"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--stats-every", "0"}, "--stats-every must be more than 0, got 0s"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--max-retries", "-3"}, "--max-retries must not be negative (0: none), got -3"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--results-maxlen", "-5"}, "--results-maxlen must not be negative (0: none), got -5"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--max-deliveries", "0"}, "--max-deliveries must be at least 1, got 0"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--commit-linger", "-1ms"}, "--commit-linger must be 0 (none) to 1s, got -1ms"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--lane-gather", "2s"}, "--lane-gather must be 0 (none) to 1s, got 2s"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--block", "30s"}, "--block 30s must be shorter than --grace 25s"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--retry-cap", "1s"}, "--retry-cap 1s is shorter than --retry-base 5s"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--registry-check-every", "1us"}, "--registry-check-every must be 0 (only SIGHUP) or at least 100ms, got 1µs"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--redis-check-fresh", "0"}, "--redis-check-fresh must be at least 3s (three background checks), got 0s"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--record-grace", "1ms", "--commit-linger", "2ms"}, "--record-grace 1ms must be longer than --commit-linger 2ms"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--sent-ttl", "30s"}, "--sent-ttl 30s must be longer than --visibility-timeout 1m0s: the window must still hold a job when another replica takes over its entry"},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--log-format", "xml"}, `--log-format: telemetry: log format "xml": want "json" or "text"`},
		{[]string{"run", "--redis", r, "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--http", "127.0.0.1:99999"}, "--http: "},
		{[]string{"run", "--redis", "http://x", "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com"}, "--redis: stream: unsupported redis URL scheme"},
		{[]string{"enqueue", "--redis", r, "--shards", "2000"}, "--shards must be 1 to 1024, got 2000"},
		{[]string{"enqueue", "--redis", r, "--prefix", "a{b"}, "--prefix: stream: bad key prefix"},
		{[]string{"enqueue", "--redis", r, "a", "b"}, `unexpected argument "b"`},
		{[]string{"status"}, "--redis is required"},
		{[]string{"status", "--redis", r, "--shards", "-1"}, "--shards must be 1 to 1024 (or left out for the recorded count), got -1"},
		{[]string{"status", "--redis", r, "--json=maybe"}, `--json: invalid boolean value "maybe"`},
		{[]string{"status", "--redis", r, "--registry", "testdata/none.yaml"}, "--registry: "},
		{[]string{"inspect", "--redis", r, "--scan-limit", "-1", "job"}, "--scan-limit must be at least 0, got -1"},
		{[]string{"inspect", "--redis", r}, "missing JOB_ID"},
		{[]string{"dead", "ls", "--redis", r, "--since", "tomorrow"}, `--since: "tomorrow" is neither an RFC 3339 time`},
		{[]string{"dead", "ls", "--redis", r, "--limit", "x"}, `--limit: invalid value "x"`},
		{[]string{"dead", "show", "--redis", r}, "missing ENTRY_ID or JOB_ID"},
		{[]string{"dead", "replay", "--redis", r, "--all", "1-0"}, "choose the records one way: ENTRY_ID..., filters, or --all"},
		{[]string{"dead", "purge", "--redis", r, "--all"}, "--all deletes every dead record: add --yes"},
		{[]string{"dead", "nope"}, `unknown command "nope"`},
		{[]string{"dead", "--redis", r, "ls"}, `"--redis" is a flag: give the command first, then its flags`},
		{[]string{"dead", "ls", "--redis", r, "--code", "NOT_A_CODE"}, `--code "NOT_A_CODE" is not an outcome code`},
		{[]string{"campaign", "create", "--redis", r, "--payload-file", "testdata/sub.json"}, "--id is required"},
		{[]string{"campaign", "create", "--redis", r, "--id", "a b", "--payload-file", "testdata/sub.json"}, "--id: byte 1 is not a letter, a digit"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c"}, "give the message with --payload-file FILE or --notification-file FILE"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/none.txt"}, "--payload-file: open testdata/none.txt"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--payload-encoding", "hex"}, `--payload-encoding: must be text or base64, got "hex"`},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--notification-file", "testdata/vapid.pem"}, "--notification-file: testdata/vapid.pem is not JSON"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--notification-file", "testdata/sub.json"}, `--notification-file: unknown field "endpoint"`},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--ttl", "-5"}, "--ttl: must be at least 0, got -5"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--urgency", "now"}, "--urgency: must be one of very-low, low, normal, high"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--topic", "a b"}, "--topic: must be 1 to 32 characters"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--class", "urgent"}, `--class: must be "transactional" or "bulk", got "urgent"`},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--send-at", "tomorrow"}, "--send-at: must be an RFC 3339 time"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--rate", "-1"}, "--rate: must be a number from 0 to 1000000"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--rate", "NaN"}, "--rate: "},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--vapid-key", ""}, "--vapid-key: must be 1 to 128 printable ASCII characters"},
		{[]string{"campaign", "create", "--redis", r, "--id", "c", "--payload-file", "testdata/sub.json", "--shards", "0"}, "--shards must be 1 to 1024, got 0"},
		{[]string{"campaign", "add", "--redis", r, "c"}, "missing ID and FILE"},
		{[]string{"campaign", "add", "--redis", r, "a/b", "testdata/subscriptions.txt"}, "ID: byte 1 is not a letter, a digit"},
		{[]string{"campaign", "add", "--redis", r, "c", "testdata/subscriptions.txt"}, "testdata/subscriptions.txt:3: not JSON; nothing written"},
		{[]string{"campaign", "add", "--redis", r, "c", "testdata/none.txt"}, "open testdata/none.txt"},
		{[]string{"campaign", "status", "--redis", r}, "missing ID"},
		{[]string{"campaign", "status", "--redis", r, "a b"}, "ID: byte 1 is not a letter, a digit"},
		{[]string{"campaign", "ls", "--redis", r, "extra"}, `unexpected argument "extra"`},
		{[]string{"campaign", "pause", "--redis", r}, "missing ID"},
		{[]string{"campaign", "cancel", "--redis", r, ""}, "ID: must be 1 to 64 characters, got 0"},
		{[]string{"campaign", "nope"}, `unknown command "nope"`},
		{[]string{"pause", "--redis", r, "--reason", "two\nlines", "fcm"}, "--reason holds a control or format character"},
		{[]string{"pause", "--redis", r, "--reason"}, "--reason needs a value"},
		{[]string{"pause", "--redis", r, ""}, "PROVIDER is empty"},
		{[]string{"resume", "--redis", r}, "missing PROVIDER"},
		{[]string{"audit", "--redis", r}, "--ids or --campaign is required"},
		{[]string{"audit", "--redis", r, "--ids", "testdata/subscriptions.txt", "--campaign", "c"}, "--ids and --campaign both choose the jobs: give one"},
		{[]string{"audit", "--redis", r, "--campaign", "a b"}, "--campaign: byte 1 is not a letter, a digit"},
		{[]string{"audit", "--redis", r, "--ids", "testdata/none.txt"}, "--ids: open testdata/none.txt"},
		{[]string{"send", "--subscription", "testdata/sub.json", "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--ttl", "abc"}, `--ttl: invalid value "abc"`},
		{[]string{"send", "--subscription", "testdata/none.json", "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com"}, "--subscription: open testdata/none.json"},
		{[]string{"send", "--subscription", "testdata/sub.json", "--vapid-key", "testdata/vapid.pem", "--subject", "mailto:a@example.com", "--ca-file", "testdata/sub.json"}, "--ca-file: "},
		{[]string{"keygen", "--public"}, "--public needs a value"},
		{[]string{"keygen", "--public", "testdata/vapid.pem", "--out", "x.pem"}, "--public reads a key; it takes no --out or --force"},
		{[]string{"check", "a.yaml", "b.yaml"}, `unexpected argument "b.yaml"`},
		{[]string{"check", "testdata/none.yaml"}, "stat testdata/none.yaml: no such file or directory"},
		{[]string{"check", "testdata"}, "testdata is a directory, not a registry file"},
		{[]string{"check", "--registry", "a.yaml", "b.yaml"}, "give the file once: as FILE or as --registry FILE"},
		{[]string{"registry", "extra"}, `unexpected argument "extra"`},
		{[]string{"inventory", "--top", "-1", "testdata/subscriptions.txt"}, "--top must be at least 0, got -1"},
		{[]string{"inventory", "--total", "x", "testdata/subscriptions.txt"}, `--total: invalid value "x"`},
		{[]string{"inventory"}, "missing FILE"},
		{[]string{"version", "--nope"}, "unknown flag --nope"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, tc.want)
			}
			if !strings.Contains(stderr, "usage: gateway-worker") {
				t.Errorf("stderr %q has no usage line", stderr)
			}
		})
	}
}

// commandLines are every command's name as typed, subcommands of dead and campaign included.
var commandLines = [][]string{
	{"run"}, {"enqueue"}, {"status"}, {"inspect"}, {"dead", "ls"}, {"dead", "show"}, {"dead", "replay"}, {"dead", "purge"},
	{"campaign", "create"}, {"campaign", "add"}, {"campaign", "status"}, {"campaign", "ls"}, {"campaign", "pause"}, {"campaign", "resume"}, {"campaign", "cancel"},
	{"pause"}, {"resume"}, {"audit"}, {"send"}, {"keygen"}, {"check"}, {"registry"}, {"inventory"}, {"version"},
}

// TestEveryHelpHasOneFormat: -h of every command prints, in this order, the usage line, a
// summary, examples, the flags under headings as --name METAVAR (no metavar that only says
// "VALUE"), the environment rule and the exit codes; the Redis commands mark --redis required.
func TestEveryHelpHasOneFormat(t *testing.T) {
	flagLine := regexp.MustCompile(`^  --[a-z][a-z0-9-]*( [A-Z][A-Z0-9_:=|\[\].]*)?( |$)`)
	heading := regexp.MustCompile(`^[A-Z][A-Za-z ]+:$`)
	for _, cmd := range commandLines {
		name := "gateway-worker " + strings.Join(cmd, " ")
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			code, stdout, help := run(t, append(cmd, "-h")...)
			if code != 0 || stdout != "" {
				t.Fatalf("-h: exit %d, stdout %q", code, stdout)
			}
			lines := strings.Split(help, "\n")
			if !strings.HasPrefix(lines[0], "usage: "+name) || lines[1] != "" || lines[2] == "" {
				t.Errorf("help does not start with the usage line and a summary:\n%s", help)
			}
			if !strings.Contains(help, "\nexamples:\n  "+name) {
				t.Errorf("help has no examples of %s:\n%s", name, help)
			}
			headings, flags := 0, 0
			for _, l := range lines {
				switch {
				case heading.MatchString(l):
					headings++
				case strings.HasPrefix(l, "  --"):
					flags++
					if !flagLine.MatchString(l) {
						t.Errorf("flag line %q is not --name METAVAR", l)
					}
					if strings.Contains(l, " VALUE ") {
						t.Errorf("flag line %q has no metavar of its own", l)
					}
				case regexp.MustCompile(`^\s+-[a-z]`).MatchString(l):
					t.Errorf("line %q lists a flag the flag package's way", l)
				}
			}
			if flags > 0 && headings == 0 {
				t.Errorf("flags without a heading:\n%s", help)
			}
			if _, entry, ok := strings.Cut(help, "\n  --redis URL "); ok {
				entry, _, _ = strings.Cut(entry, "\n  --")
				if entry, _, _ = strings.Cut(entry, "\n\n"); !strings.HasSuffix(entry, "(required)") {
					t.Errorf("--redis is not marked required: %q", entry)
				}
			}
			if flags > 0 && !strings.Contains(help, "\nEvery flag can also be set as GATEWAY_<FLAG> (GATEWAY_") {
				t.Errorf("help does not say flags come from GATEWAY_<FLAG>:\n%s", help)
			}
			if !strings.Contains(help, "\nexit status: 0 done; 2 a flag or argument refused") {
				t.Errorf("help does not give the exit codes:\n%s", help)
			}
		})
	}
	// help COMMAND [SUBCOMMAND] is COMMAND [SUBCOMMAND] -h.
	for _, cmd := range [][]string{{"status"}, {"dead", "ls"}} {
		code, _, viaHelp := run(t, append([]string{"help"}, cmd...)...)
		_, _, viaFlag := run(t, append(cmd, "-h")...)
		if code != 0 || viaHelp != viaFlag {
			t.Errorf("help %v: exit %d, and it differs from %v -h", cmd, code, cmd)
		}
	}
	// dead alone lists its subcommands.
	if code, _, help := run(t, "dead", "-h"); code != 0 || !strings.Contains(help, "usage: gateway-worker dead <command>") || !strings.Contains(help, "  replay  ") {
		t.Errorf("dead -h: exit %d:\n%s", code, help)
	}
}
