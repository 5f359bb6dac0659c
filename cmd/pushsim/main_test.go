package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webpush-gateway/webpush-gateway/adapter"
	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/simtest"
	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/timetest"
	"github.com/webpush-gateway/webpush-gateway/job"
	"github.com/webpush-gateway/webpush-gateway/pushsim"
	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

// TestServesWhatItPrints starts the command, then does what its output tells a user to: a
// subscription from the admin URL, and a push sent with the printed --ca-file and --connect-to
// flags through the real adapter, which the simulator decrypts and records.
func TestServesWhatItPrints(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// What it prints is read through a pipe, line by line, as a user reads it.
	outR, outW := io.Pipe()
	printed := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(outR)
		for len(lines) < 5 && sc.Scan() {
			lines = append(lines, sc.Text())
		}
		printed <- lines
		_, _ = io.Copy(io.Discard, outR)
	}()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := runMain(ctx, []string{"--listen", "127.0.0.1:0", "--dir", dir}, outW, &stderr)
		outW.Close()
		done <- code
	}()
	lines := timetest.Receive(t, printed, 10*time.Second, "pushsim's first lines")
	if len(lines) < 5 {
		code := <-done
		t.Fatalf("pushsim exited %d after printing %q: %s", code, lines, stderr.String())
	}
	if !strings.HasPrefix(lines[0], "pushsim listening on 127.0.0.1:") || !strings.Contains(lines[0], "HTTP/2") {
		t.Errorf("first line %q", lines[0])
	}
	caFile := value(t, lines[1], "CA file:")
	adminURL := value(t, lines[2], "admin URL:")
	if filepath.Dir(caFile) != dir {
		t.Errorf("CA file %s is not in --dir %s", caFile, dir)
	}
	send, ok := strings.CutPrefix(lines[3], "send to it with: ")
	if !ok {
		t.Fatalf("fourth line %q does not give the flags", lines[3])
	}
	var tr cli.Transport
	words := strings.Fields(send)
	for i := 0; i+1 < len(words); i += 2 {
		switch words[i] {
		case "--ca-file":
			tr.CAFile = words[i+1]
		case "--connect-to":
			tr.ConnectTo = append(tr.ConnectTo, words[i+1])
		default:
			t.Fatalf("unexpected word %q in %q", words[i], lines[3])
		}
	}
	if tr.CAFile != caFile || len(tr.ConnectTo) != 5 || !strings.HasPrefix(tr.ConnectTo[4], pushsim.GenericHost+":443=") {
		t.Fatalf("flags %q: CA file %q, %d --connect-to; want one for each of the five hosts, %s included", send, tr.CAFile, len(tr.ConnectTo), pushsim.GenericHost)
	}
	// The last line is the same, for a shell to eval.
	want := "export ADMIN=" + adminURL + " CA=" + caFile + " CONNECT_TO=" + strings.Join(tr.ConnectTo, ",")
	if lines[4] != want {
		t.Errorf("fifth line %q, want %q", lines[4], want)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := httpBody(t, http.MethodGet, adminURL+"/ca.pem", ""); got != string(pem) {
		t.Errorf("GET /ca.pem is not the CA file's certificate")
	}

	key := simtest.VAPIDKey(t)
	var sub job.Subscription
	body := httpBody(t, http.MethodPost, adminURL+"/subscriptions", `{"provider":"apple","application_server_key":"`+key.PublicKey()+`"}`)
	if err := json.Unmarshal([]byte(body), &sub); err != nil || !strings.HasPrefix(sub.Endpoint, "https://"+pushsim.AppleHost+"/") {
		t.Fatalf("POST /subscriptions: %q (%v)", body, err)
	}
	tr.Subject = "mailto:ops@example.com"
	reg, err := cli.LoadRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	sender, err := tr.Sender(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	out := sender.Send(ctx, &adapter.Message{Subscription: sub, Payload: []byte("from the printed flags"), TTL: 60, Key: key})
	if out.Code != taxonomy.Accepted {
		t.Fatalf("send through the printed flags: %+v", out)
	}
	// The self-hosted service's host too.
	var generic job.Subscription
	body = httpBody(t, http.MethodPost, adminURL+"/subscriptions", `{"provider":"generic","application_server_key":"`+key.PublicKey()+`"}`)
	if err := json.Unmarshal([]byte(body), &generic); err != nil || !strings.HasPrefix(generic.Endpoint, "https://"+pushsim.GenericHost+"/") {
		t.Fatalf("POST /subscriptions generic: %q (%v)", body, err)
	}
	if out := sender.Send(ctx, &adapter.Message{Subscription: generic, Payload: []byte("self-hosted"), TTL: 60, Key: key}); out.Code != taxonomy.Accepted {
		t.Fatalf("send to %s through the printed flags: %+v", pushsim.GenericHost, out)
	}
	var ds []pushsim.Delivery
	if err := json.Unmarshal([]byte(httpBody(t, http.MethodGet, adminURL+"/deliveries?endpoint="+sub.Endpoint, "")), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || string(ds[0].Plaintext) != "from the printed flags" {
		t.Fatalf("deliveries %+v, want the one push, decrypted", ds)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after the context ended: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pushsim did not stop within 10 s of its context ending")
	}
}

func value(t *testing.T, line, label string) string {
	t.Helper()
	v, ok := strings.CutPrefix(line, label)
	if !ok || strings.TrimSpace(v) == "" {
		t.Fatalf("line %q does not start with %q and a value", line, label)
	}
	return strings.TrimSpace(v)
}

func httpBody(t *testing.T, method, url, body string) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s (%v)", method, url, resp.StatusCode, b, err)
	}
	return string(b)
}

func TestRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"sample below one", []string{"--sample", "0"}, "", "--sample must be at least 1, got 0"},
		{"sample not a number", []string{"--sample", "x"}, "", `--sample: invalid value "x"`},
		{"stray word hides later flags", []string{"stray", "--lean"}, "", `unexpected argument "stray"`},
		{"bad environment value", nil, "GATEWAY_SAMPLE=abc", "GATEWAY_SAMPLE"},
		{"unknown flag", []string{"--nope"}, "", "unknown flag --nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if name, v, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(name, v)
			}
			var stdout, stderr bytes.Buffer
			code := runMain(context.Background(), tc.args, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "usage: pushsim") || stdout.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout.String(), stderr.String(), tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"-h"}, &stdout, &stderr); code != 0 || stdout.Len() != 0 {
		t.Fatalf("-h: exit %d, stdout %q", code, stdout.String())
	}
	for _, want := range []string{"usage: pushsim [--listen ADDR]", "\nexamples:\n  pushsim ", "\nListen:\n  --admin ADDR", "--sample N",
		"\nEvery flag can also be set as GATEWAY_<FLAG>", "\nexit status: 0 done; 2 a flag or argument refused"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
}
