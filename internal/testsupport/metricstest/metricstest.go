// Package metricstest is what tests need to check the worker's metrics: Prometheus's own
// promtool to lint a scrape (rather than a copy of its rules), and the value of one series in
// a gather or a scrape.
package metricstest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Promtool is promtool on the PATH or where scripts/install-deps.sh puts it (bin/promtool at
// the repository root). It fails the test when it is in neither.
func Promtool(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("metricstest: cannot find the repository root")
	}
	local := filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "promtool")
	if fi, err := os.Stat(local); err == nil && fi.Mode()&0o111 != 0 {
		return local
	}
	t.Fatalf("promtool is not on the PATH nor at %s: run `make deps` (scripts/install-deps.sh extracts it from Debian's prometheus package)", filepath.Clean(local))
	return ""
}

// CheckMetrics fails the test unless `promtool check metrics` passes the scrape text.
func CheckMetrics(t testing.TB, text []byte) {
	t.Helper()
	cmd := exec.Command(Promtool(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// Families are metric families by name, from a gather or a parsed scrape.
type Families map[string]*dto.MetricFamily

// Gather gathers g.
func Gather(t testing.TB, g prometheus.Gatherer) Families {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := make(Families, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return fams
}

// Parse parses a scrape in the Prometheus text format.
func Parse(t testing.TB, text []byte) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return fams
}

// Lookup is the value of the first series of name whose labels include the given name/value
// pairs: a counter's or a gauge's value, or a histogram's count. ok is false when there is no
// such series.
func (f Families) Lookup(name string, labels ...string) (v float64, ok bool) {
series:
	for _, m := range f[name].GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// Value is Lookup that fails the test when there is no such series.
func (f Families) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	v, ok := f.Lookup(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}
