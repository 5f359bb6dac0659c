package deploy_test

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/webpush-gateway/webpush-gateway/taxonomy"
)

type monitoringRule = monitoringv1.PrometheusRule

// scalingRule is the recording rule KEDA's Prometheus trigger queries.
const scalingRule = "webpush:scaling_lag_entries:sum"

var promql = parser.NewParser(parser.Options{})

// grafanaVars stands in for a dashboard's variables so its queries parse: $__rate_interval and
// $__interval become durations, and $name / ${name} a recognisable value.
var grafanaVars = regexp.MustCompile(`\$__rate_interval|\$__interval|\$\{(\w+)\}|\$(\w+)`)

const varValue = "grafana_variable_"

func substituteGrafanaVars(q string) string {
	return grafanaVars.ReplaceAllStringFunc(q, func(m string) string {
		switch m {
		case "$__rate_interval":
			return "5m"
		case "$__interval":
			return "1m"
		}
		return varValue + strings.Trim(m, "${}")
	})
}

// use is one metric selector of an expression with its context.
type use struct {
	name      string // the selector's metric name as written
	matchers  []*labels.Matcher
	aggregate string // the innermost aggregation around it ("" for none)
}

// selectors parses a PromQL expression and returns every metric selector in it.
func selectors(expr string) ([]use, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var uses []use
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		u := use{name: vs.Name, matchers: vs.LabelMatchers}
		if u.name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					u.name = m.Value
				}
			}
		}
		for i := len(path) - 1; i >= 0; i-- {
			if a, ok := path[i].(*parser.AggregateExpr); ok {
				u.aggregate = a.Op.String()
				break
			}
		}
		uses = append(uses, u)
		return nil
	})
	return uses, nil
}

// metricNames is every metric an expression reads, as written (histogram series with their
// _bucket/_sum/_count suffix), sorted and without repeats.
func metricNames(expr string) ([]string, error) {
	uses, err := selectors(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, u := range uses {
		if !slices.Contains(names, u.name) {
			names = append(names, u.name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// family maps a series name to the metric family a scrape lists it under: a histogram's
// _bucket, _sum and _count series belong to the histogram.
func family(name string, families map[string]metricFamily) (string, metricFamily, bool) {
	if f, ok := families[name]; ok {
		return name, f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := families[base]; ok && f.typ == "histogram" {
				return base, f, true
			}
		}
	}
	return "", metricFamily{}, false
}

// queryContext is what a query may refer to besides the worker's metrics.
type queryContext struct {
	families    map[string]metricFamily
	recorded    map[string]bool // recording rules of the PrometheusRule
	providerIDs []string
}

// classValues are the values of the class label: a lane's class, and "" (no label) on the
// queue gauges of the streams that are no lane.
var classValues = []string{"transactional", "bulk", ""}

// checkQuery reports every reference of a query that a running worker would not answer: an
// unknown metric, a label the metric does not have, a code that is not a taxonomy code, a
// stream, class or provider no worker reports, and a queue gauge combined across replicas with
// anything but max.
func checkQuery(where, expr string, qc queryContext) []error {
	uses, err := selectors(expr)
	if err != nil {
		return []error{fmt.Errorf("%s: %v", where, err)}
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}
	codes := []string{}
	for _, c := range taxonomy.Codes() {
		codes = append(codes, string(c))
	}
	streams := append(slices.Clone(fixedStreams), scaledStreams(qc.providerIDs)[2:]...)
	for _, u := range uses {
		if u.name == "" {
			bad("a selector without a metric name")
			continue
		}
		if qc.recorded[u.name] {
			continue
		}
		fname, f, ok := family(u.name, qc.families)
		if !ok {
			bad("metric %s is not one the worker exposes", u.name)
			continue
		}
		if queueGauges[fname] && u.aggregate != "max" {
			what := u.aggregate
			if what == "" {
				what = "no aggregation"
			}
			bad("queue gauge %s is combined with %s; every replica reports the same value, so take max", fname, what)
		}
		for _, m := range u.matchers {
			if m.Name == model.MetricNameLabel {
				continue
			}
			known := slices.Contains(f.labels, m.Name) || slices.Contains(targetLabels, m.Name) ||
				(m.Name == "le" && strings.HasSuffix(u.name, "_bucket"))
			if !known {
				bad("%s has no label %q (labels: %v)", u.name, m.Name, f.labels)
				continue
			}
			switch m.Name {
			case "code":
				errs = append(errs, checkValues(where, u.name, m, codes)...)
			case "stream":
				errs = append(errs, checkValues(where, u.name, m, streams)...)
			case "class":
				errs = append(errs, checkValues(where, u.name, m, classValues)...)
			case "provider":
				errs = append(errs, checkValues(where, u.name, m, append(slices.Clone(qc.providerIDs), varValue+"provider"))...)
			}
		}
	}
	return errs
}

// checkValues checks a matcher against the values its label can have: an equality must name
// one; a regular expression that is a list of literals must name only real ones, and any other
// must match at least one.
func checkValues(where, metric string, m *labels.Matcher, values []string) []error {
	switch m.Type {
	case labels.MatchEqual, labels.MatchNotEqual:
		if !slices.Contains(values, m.Value) {
			return []error{fmt.Errorf("%s: %s{%s}: %q is not a value the worker reports (%v)", where, metric, m.Name, m.Value, values)}
		}
		return nil
	}
	if lits, ok := literals(m.Value); ok {
		var errs []error
		for _, l := range lits {
			if !slices.Contains(values, l) {
				errs = append(errs, fmt.Errorf("%s: %s{%s%s%q}: %q is not a value the worker reports (%v)", where, metric, m.Name, m.Type, m.Value, l, values))
			}
		}
		return errs
	}
	for _, v := range values {
		if m.Matches(v) != (m.Type == labels.MatchNotRegexp) {
			return nil
		}
	}
	return []error{fmt.Errorf("%s: %s{%s%s%q} matches none of %v", where, metric, m.Name, m.Type, m.Value, values)}
}

// literals returns the alternatives of a regular expression made only of literal strings
// ("A|B|C"), and false for any other.
func literals(re string) ([]string, bool) {
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return nil, false
	}
	r = r.Simplify()
	var subs []*syntax.Regexp
	if r.Op == syntax.OpAlternate {
		subs = r.Sub
	} else {
		subs = []*syntax.Regexp{r}
	}
	var out []string
	for _, s := range subs {
		if s.Op != syntax.OpLiteral || s.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		out = append(out, string(s.Rune))
	}
	return out, true
}

// ruleExprs returns every rule expression of a PrometheusRule by "group/name", and the names
// of its recording rules.
func ruleExprs(r *monitoringRule) (map[string]string, map[string]bool) {
	exprs, recorded := map[string]string{}, map[string]bool{}
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			name := rule.Alert
			if rule.Record != "" {
				name = rule.Record
				recorded[rule.Record] = true
			}
			exprs[g.Name+"/"+name] = rule.Expr.String()
		}
	}
	return exprs, recorded
}

// checkPrometheusTrigger: the KEDA query reads the scaling rule of this fleet's namespace, and
// that rule scales on exactly the intakes and every lane of the registry.
func checkPrometheusTrigger(b *built, so *scaledObject, tr scaleTrigger, ids []string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	uses, err := selectors(tr.Metadata["query"])
	if err != nil {
		return []error{fmt.Errorf("trigger %q query: %v", tr.Name, err)}
	}
	if len(uses) != 1 || uses[0].name != scalingRule {
		bad("trigger %q query %q must read %s only", tr.Name, tr.Metadata["query"], scalingRule)
	}
	for _, u := range uses {
		ns := ""
		for _, m := range u.matchers {
			if m.Name == "namespace" && m.Type == labels.MatchEqual {
				ns = m.Value
			}
		}
		if ns != so.Namespace {
			bad("trigger %q query selects namespace %q, the fleet is in %q", tr.Name, ns, so.Namespace)
		}
	}
	if len(b.rules) != 1 {
		return append(errs, fmt.Errorf("%d PrometheusRules, want 1", len(b.rules)))
	}
	exprs, recorded := ruleExprs(b.rules[0])
	if !recorded[scalingRule] {
		return append(errs, fmt.Errorf("no recording rule %s for the trigger to read", scalingRule))
	}
	var expr string
	for k, v := range exprs {
		if strings.HasSuffix(k, "/"+scalingRule) {
			expr = v
		}
	}
	ruleUses, err := selectors(expr)
	if err != nil {
		return append(errs, err)
	}
	candidates := append(slices.Clone(fixedStreams), scaledStreams(ids)[2:]...)
	selected := map[string]bool{}
	for _, u := range ruleUses {
		if u.name != "webpush_queue_lag_entries" {
			continue
		}
		for _, s := range candidates {
			if matchesAll(u.matchers, map[string]string{"stream": s}) {
				selected[s] = true
			}
		}
	}
	var got []string
	for s := range selected {
		got = append(got, s)
	}
	sort.Strings(got)
	want := scaledStreams(ids)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		bad("%s scales on the lag of %v, want exactly %v (the intakes and every lane of the registry)", scalingRule, got, want)
	}
	return errs
}

// matchesAll says whether a series with these labels (others empty) passes every matcher.
func matchesAll(ms []*labels.Matcher, lbls map[string]string) bool {
	for _, m := range ms {
		if m.Name == model.MetricNameLabel {
			continue
		}
		if !m.Matches(lbls[m.Name]) {
			return false
		}
	}
	return true
}

// TestRulesUseWorkerMetrics: every expression of the PrometheusRule and the ScaledObject's
// query reads metrics, labels and label values a running worker serves, and combines the queue
// gauges with max. A renamed metric or label, a code that is not a taxonomy code, or a summed
// queue gauge fails here.
func TestRulesUseWorkerMetrics(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			b := build(t, dir)
			exprs, recorded := ruleExprs(b.rules[0])
			qc := queryContext{families: workerMetrics(t), recorded: recorded, providerIDs: registryOf(t, b).IDs()}
			keys := make([]string, 0, len(exprs))
			for k := range exprs {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				for _, err := range checkQuery(k, exprs[k], qc) {
					t.Error(err)
				}
			}
			for _, tr := range b.scaledObjects[0].Spec.Triggers {
				if q := tr.Metadata["query"]; q != "" {
					for _, err := range checkQuery("ScaledObject trigger "+tr.Name, q, qc) {
						t.Error(err)
					}
				}
			}
			names := map[string]bool{}
			for _, k := range keys {
				ns, err := metricNames(exprs[k])
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range ns {
					names[n] = true
				}
			}
			if len(names) < 8 {
				t.Errorf("the rules read only %d metrics: the extraction is broken", len(names))
			}
		})
	}
}

// TestQueryChecksCatchBreakage: the checks above refuse a renamed metric, an unknown label, a
// code outside the taxonomy, a stream or class no worker reports, and a summed queue gauge.
func TestQueryChecksCatchBreakage(t *testing.T) {
	qc := queryContext{families: workerMetrics(t), recorded: map[string]bool{scalingRule: true}, providerIDs: []string{"fcm", "apple"}}
	for _, tc := range []struct{ expr, want string }{
		{`sum(rate(webpush_send_total[5m]))`, "webpush_send_total is not one the worker exposes"},
		{`sum by (provider) (rate(webpush_sends_total{status="500"}[5m]))`, `no label "status"`},
		{`sum(rate(webpush_sends_total{code=~"ACCEPTED|THROTTLED"}[5m]))`, `"THROTTLED" is not a value`},
		{`max(webpush_queue_lag_entries{stream="lane_fcm"})`, `"lane_fcm" is not a value`},
		{`sum(rate(webpush_sends_total{class="urgent"}[5m]))`, `"urgent" is not a value`},
		{`histogram_quantile(0.99, sum by (le) (rate(webpush_send_wait_seconds_bucket{class="transactional"}[5m])))`, ""},
		{`max by (stream) (webpush_oldest_pending_age_seconds{class=~"transactional|bulk"})`, ""},
		{`sum(rate(webpush_send_duration_seconds_count{class="bulk"}[5m]))`, `no label "class"`},
		{`sum(webpush_queue_lag_entries{stream="intake"})`, "take max"},
		{`webpush_oldest_pending_age_seconds > 300`, "no aggregation"},
		{`sum(webpush_inflight_requests{provider="wns"})`, `"wns" is not a value`},
		{`histogram_quantile(0.99, sum by (le) (rate(webpush_send_duration_seconds_bucket{provider="fcm"}[5m])))`, ""},
	} {
		errs := checkQuery("test", tc.expr, qc)
		got := fmt.Sprint(errs)
		if tc.want == "" && len(errs) > 0 || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %v, want %q", tc.expr, errs, tc.want)
		}
	}
	if names, err := metricNames(`sum(rate(a_total[5m])) / on() group_left max(b{x="y"}) + c_bucket`); err != nil ||
		!slices.Equal(names, []string{"a_total", "b", "c_bucket"}) {
		t.Errorf("metricNames = %v, %v", names, err)
	}
}
