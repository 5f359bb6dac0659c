package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/proctest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/redistest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/vapidtest"
)

// brokenRawKeys are the ways a raw key given on the command line goes wrong. Each must fail to
// load without any of it reaching the output.
func brokenRawKeys(raw, pemText string) map[string]string {
	scalar, _ := base64.RawURLEncoding.DecodeString(raw)
	lines := strings.Split(strings.TrimSpace(pemText), "\n")
	return map[string]string{
		"cut by one":               raw[:len(raw)-1],
		"a character more":         raw + "A",
		"a bad character":          raw[:20] + "!" + raw[21:],
		"quoted":                   `"` + raw + `"`,
		"31 bytes, padded":         base64.StdEncoding.EncodeToString(scalar[:31]), // KEY=: not NAME=VALUE
		"30 bytes, padded twice":   base64.StdEncoding.EncodeToString(scalar[:30]),
		"padded, then junk":        base64.StdEncoding.EncodeToString(scalar) + "=junk",
		"KEY=NAME, reversed":       raw + "=legacy",
		"hex":                      hex.EncodeToString(scalar),
		"named, cut":               "legacy=" + raw[:len(raw)-2],
		"named, padded and cut":    "legacy=" + base64.StdEncoding.EncodeToString(scalar[:31]),
		"PEM cut":                  strings.Join(lines[:2], "\n"),
		"PEM on one line":          strings.ReplaceAll(pemText, "\n", " "),
		"PEM without its footer":   strings.Join(lines[:len(lines)-1], "\n"),
		"named PEM without header": "legacy=" + strings.Join(lines[1:], "\n"),
	}
}

// pemLabel is a PEM line's dashed label, which is no key material.
var pemLabel = regexp.MustCompile(`-----[A-Z ]*-----`)

// assertNoKey fails when out holds any run of more than 8 characters of the material (the raw
// key, the PEM body, the value given), PEM labels left out.
func assertNoKey(t *testing.T, what, out string, material ...string) {
	t.Helper()
	const run = 9
	for _, m := range material {
		for line := range strings.Lines(pemLabel.ReplaceAllString(m, "\n")) {
			line = strings.TrimSpace(line)
			for i := 0; i+run <= len(line); i++ {
				if strings.Contains(out, line[i:i+run]) {
					t.Errorf("%s holds %q of the key:\n%s", what, line[i:i+run], out)
					return
				}
			}
		}
	}
}

// TestKeyNeverPrinted: run and send given a raw key in a broken form, on the command line or in
// GATEWAY_VAPID_KEY, exit 2 naming the key and what they wanted, and print nothing of the key on
// stdout or stderr (where run logs).
func TestKeyNeverPrinted(t *testing.T) {
	key := vapidtest.NewKey(t)
	raw, pemText := key.Raw(), key.SEC1PEM()
	pemBody := strings.Join(strings.Split(strings.TrimSpace(pemText), "\n")[1:4], "\n")
	for name, value := range brokenRawKeys(raw, pemText) {
		commands := map[string][]string{
			"run":  {"run", "--redis", "redis://127.0.0.1:1/0", "--subject", "mailto:ops@example.com", "--log-level", "debug"},
			"send": {"send", "--subscription", "testdata/sub.json", "--payload", "x", "--subject", "mailto:ops@example.com"},
		}
		for cmd, args := range commands {
			keyName := "default" // send has one key and no NAME=
			if cmd == "run" && strings.HasPrefix(value, "legacy=") {
				keyName = "legacy"
			}
			wantErr := `vapid: bad key: "` + keyName + `": not a readable file (no such file or directory) nor a valid raw key (`
			t.Run(cmd+" "+name+" as a flag", func(t *testing.T) {
				code, stdout, stderr := run(t, append(args, "--vapid-key", value)...)
				if code != 2 || !strings.Contains(stderr, wantErr) {
					t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, wantErr)
				}
				assertNoKey(t, "stdout", stdout, raw, pemBody, value)
				assertNoKey(t, "stderr", stderr, raw, pemBody, value)
			})
			if strings.Contains(value, ",") {
				continue // the variable splits on commas
			}
			t.Run(cmd+" "+name+" in the environment", func(t *testing.T) {
				t.Setenv("GATEWAY_VAPID_KEY", value)
				code, stdout, stderr := run(t, args...)
				if code != 2 || !strings.Contains(stderr, wantErr) {
					t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, wantErr)
				}
				assertNoKey(t, "stdout", stdout, raw, pemBody, value)
				assertNoKey(t, "stderr", stderr, raw, pemBody, value)
			})
		}
	}
}

// TestKeyLostToASpaceIsNotPrinted: `--vapid-key= KEY` leaves the key as a stray word after the
// flags; the refusal describes it without repeating it.
func TestKeyLostToASpaceIsNotPrinted(t *testing.T) {
	key := vapidtest.NewKey(t)
	raw, pemText := key.Raw(), key.SEC1PEM()
	pemBody := strings.Join(strings.Split(strings.TrimSpace(pemText), "\n")[1:4], "\n")
	for _, cmd := range [][]string{
		{"run", "--redis", "redis://127.0.0.1:1/0", "--subject", "mailto:ops@example.com", "--vapid-key=", raw},
		{"send", "--subscription", "testdata/sub.json", "--subject", "mailto:ops@example.com", "--vapid-key=", raw},
	} {
		code, stdout, stderr := run(t, cmd...)
		if code != 2 || !strings.Contains(stderr, "unexpected argument of 43 characters") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and the stray word described by its length", cmd[0], code, stderr)
		}
		assertNoKey(t, "stdout", stdout, raw, pemBody, raw)
		assertNoKey(t, "stderr", stderr, raw, pemBody, raw)
	}
}

// TestRawKeyWorksAndStaysOutOfLogs: the raw key the help invites is taken by run (which starts,
// logs at debug level and stops cleanly) and by send (which delivers with it), and no log line
// or output holds any of it.
func TestRawKeyWorksAndStaysOutOfLogs(t *testing.T) {
	key := vapidtest.NewKey(t)
	raw, pemText, public := key.Raw(), key.SEC1PEM(), key.PublicKey()
	pemBody := strings.Join(strings.Split(strings.TrimSpace(pemText), "\n")[1:4], "\n")

	t.Run("run", func(t *testing.T) {
		srv := redistest.Start(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var stdout, stderr proctest.Buffer // written by the worker's goroutines while the test reads
		done := make(chan int, 1)
		go func() {
			done <- runMain(ctx, []string{"run", "--http", "", "--redis", srv.URL(), "--subject", "mailto:ops@example.com",
				"--log-level", "debug", "--grace", "1s", "--block", "100ms", "--vapid-key", raw, "--vapid-key", "legacy=" + pemText}, &stdout, &stderr)
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(stderr.String(), "dispatch: running") {
			select {
			case code := <-done:
				t.Fatalf("run exited %d before running:\n%s", code, stderr.String())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("run did not start within 30s:\n%s", stderr.String())
			}
		}
		cancel()
		if code := <-done; code != 0 {
			t.Fatalf("run exited %d:\n%s", code, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if len(lines) < 3 {
			t.Fatalf("run logged %d lines, want at least starting, running and stopped:\n%s", len(lines), stderr.String())
		}
		for _, line := range lines {
			if !json.Valid([]byte(line)) {
				t.Errorf("log line is not JSON: %q", line)
			}
			assertNoKey(t, "log line", line, raw, pemBody)
		}
		assertNoKey(t, "stdout", stdout.String(), raw, pemBody)
	})

	t.Run("send", func(t *testing.T) {
		sim, sub, subFile := sendTarget(t, "autopush", public)
		code, stdout, stderr := run(t, "send", "--subscription", subFile, "--payload", "raw key",
			"--vapid-key", raw, "--subject", "mailto:ops@example.com")
		if code != 0 || !strings.Contains(stdout, `"code":"ACCEPTED"`) {
			t.Fatalf("send with a raw key: exit %d, stdout %q, stderr %q; want ACCEPTED", code, stdout, stderr)
		}
		if ds := sim.DeliveriesFor(sub.Endpoint); len(ds) != 1 || string(ds[0].Plaintext) != "raw key" {
			t.Fatalf("pushsim deliveries = %+v, want one carrying the payload", ds)
		}
		assertNoKey(t, "stdout", stdout, raw, pemBody)
		assertNoKey(t, "stderr", stderr, raw, pemBody)
	})
}
