package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/metricstest"
)

// rulesTests is the promtool unit test file, relative to deploy/.
const rulesTests = "base/tests/rules_test.yaml"

// writeRules writes an overlay's PrometheusRule spec as a plain Prometheus rule file.
func writeRules(t *testing.T, b *built, dir string) string {
	t.Helper()
	if len(b.rules) != 1 {
		t.Fatalf("%s: %d PrometheusRules, want 1", b.dir, len(b.rules))
	}
	j, err := json.Marshal(b.rules[0].Spec)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(name, y, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(metricstest.Promtool(t), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestPromtoolCheckRules: Prometheus itself accepts every overlay's rules (syntax, functions,
// templates, durations).
func TestPromtoolCheckRules(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			tmp := t.TempDir()
			writeRules(t, build(t, dir), tmp)
			runPromtool(t, tmp, "check", "rules", "rules.yaml")
		})
	}
}

// TestPromtoolTestRules runs the unit tests of base/tests/rules_test.yaml against the
// production overlay's rules, after checking that every alert has a case where it fires and
// one where it stays quiet, and that every recording rule is tested.
func TestPromtoolTestRules(t *testing.T) {
	b := build(t, "overlays/production")
	raw, err := os.ReadFile(rulesTests)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			Name      string `json:"name"`
			AlertRule []struct {
				Alertname string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
			PromQL []struct {
				Expr string `json:"expr"`
			} `json:"promql_expr_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet, exprs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRule {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
		for _, e := range tc.PromQL {
			exprs[e.Expr] = true
		}
	}
	var alerts []string
	for _, g := range b.rules[0].Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
			if r.Record != "" && !exprs[r.Record] {
				t.Errorf("recording rule %s has no promql_expr_test in %s", r.Record, rulesTests)
			}
		}
	}
	sort.Strings(alerts)
	for _, a := range alerts {
		if !fires[a] || !quiet[a] {
			t.Errorf("alert %s: a case where it fires: %v, one where it stays quiet: %v; %s needs both", a, fires[a], quiet[a], rulesTests)
		}
	}
	tmp := t.TempDir()
	writeRules(t, b, tmp)
	if err := os.WriteFile(filepath.Join(tmp, "rules_test.yaml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, tmp, "test", "rules", "rules_test.yaml")
}
