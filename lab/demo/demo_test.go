package demo

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoWritesReportWithEveryProviderAndTheFault runs a short demo end to end (redis-server,
// pushsim, the worker, a stall injected halfway) and checks what a reader of the report needs:
// a throughput series per provider, the fault window, and a PNG of the chart.
func TestDemoWritesReportWithEveryProviderAndTheFault(t *testing.T) {
	t.Parallel() // each demo has its own Redis (or prefix), pushsim and worker, and mostly waits
	if testing.Short() {
		t.Skip("runs the demo for several seconds")
	}
	dir := t.TempDir()
	report := filepath.Join(dir, "demo-report.html")
	f, err := ParseFault("autopush=stall")
	if err != nil {
		t.Fatal(err)
	}
	text := runDemo(t, Options{Duration: 6 * time.Second, Rate: 100, Fault: f, Report: report, Payload: "test"})
	if first, _, _ := strings.Cut(text, "\n"); !strings.HasPrefix(first, "redis:") {
		t.Errorf("first line %q does not say which Redis the demo uses", first)
	}
	for _, want := range []string{"PROVIDER", "SENT/S", "BREAKER", "(fault injected)", "none lost", "demo-report.png"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	html, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	for _, p := range providerOrder {
		if !strings.Contains(page, `data-provider="`+p+`"`) {
			t.Errorf("report has no series for %s", p)
		}
	}
	if !strings.Contains(page, "data-fault-from-ms=") || !strings.Contains(page, "autopush stalls") {
		t.Error("report does not show the fault window")
	}
	b, err := os.ReadFile(filepath.Join(dir, "demo-report.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if img.Bounds().Dx() < 600 {
		t.Errorf("PNG is %v", img.Bounds())
	}
}

func TestParseDemoFault(t *testing.T) {
	for _, bad := range []string{"autopush", "gcm=stall", "fcm=503", "fcm=503:2", "fcm=429:0", "fcm=melt"} {
		if _, err := ParseFault(bad); err == nil {
			t.Errorf("ParseFault(%q) accepted it", bad)
		}
	}
	for in, want := range map[string]string{"none": "", "apple=503:0.4": "apple", "fallback=429:5": "generic", "wns=stall": "wns"} {
		f, err := ParseFault(in)
		if err != nil || f.provider != want {
			t.Errorf("ParseFault(%q) = %q, %v; want %q", in, f.provider, err, want)
		}
	}
}

// runDemo runs the demo with o and returns what it printed. A demo that fails fails the test,
// with its output.
func runDemo(t *testing.T, o Options) string {
	t.Helper()
	var out bytes.Buffer
	if err := Run(context.Background(), o, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	return out.String()
}
