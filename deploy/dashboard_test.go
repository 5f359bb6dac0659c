package deploy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	grafanaprom "github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

const dashboardFile = "grafana/webpush-gateway.json"

// dashJSON is the part of the dashboard model the checks below walk, read with encoding/json
// beside the SDK's strict decoding.
type dashJSON struct {
	Templating struct {
		List []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashPanel struct {
	Type       string `json:"type"`
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Repeat     string `json:"repeat"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

// labelValuesQuery is a Grafana label_values(selector, label) variable query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// checkDashboard reports what would make a panel empty or wrong: a panel without the
// Prometheus datasource variable, an empty query, a query the worker's metrics cannot answer
// (see checkQuery: unknown metrics and labels, queue gauges not combined with max), a
// provider row that does not repeat over the provider variable or a panel in it that does not
// filter by $provider.
func checkDashboard(d dashJSON, qc queryContext) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			bad("variable %s: query %q is not label_values(selector, label)", v.Name, q)
			continue
		}
		errs = append(errs, checkQuery("variable "+v.Name, substituteGrafanaVars(m[1]), qc)...)
	}
	for _, want := range []string{"datasource", "namespace", "provider"} {
		if !vars[want] {
			bad("no %s variable", want)
		}
	}
	ids := map[int]bool{}
	inProviderRow := false
	providerRows := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			bad("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			inProviderRow = p.Repeat == "provider"
			if inProviderRow {
				providerRows++
				if !strings.Contains(p.Title, "$provider") {
					bad("row %q repeats over provider but its title does not name $provider", p.Title)
				}
			}
			continue
		}
		where := fmt.Sprintf("panel %q", p.Title)
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			bad("%s: datasource %+v, want the ${datasource} Prometheus variable", where, p.Datasource)
		}
		if len(p.Targets) == 0 {
			bad("%s: no queries", where)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				bad("%s: an empty query or one without refId", where)
				continue
			}
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				bad("%s query %s: no datasource", where, tg.RefID)
			}
			if !strings.Contains(tg.Expr, `namespace="$namespace"`) {
				bad("%s query %s: does not select namespace=\"$namespace\"", where, tg.RefID)
			}
			if inProviderRow && !strings.Contains(tg.Expr, `provider="$provider"`) {
				bad("%s query %s: in the provider row but not filtered by provider=\"$provider\"", where, tg.RefID)
			}
			errs = append(errs, checkQuery(where+" query "+tg.RefID, substituteGrafanaVars(tg.Expr), qc)...)
		}
	}
	if providerRows != 1 {
		bad("%d rows repeat over $provider, want 1", providerRows)
	}
	return errs
}

// decodeDashboard decodes a dashboard with the SDK's strict decoder, its timeseries options and
// Prometheus queries by their own strict decoders. The file is Grafana's classic dashboard
// JSON, the form every Grafana imports and provisions; the SDK's dashboardv2 is the newer
// resource schema, another shape of file.
//
//lint:ignore SA1019 the classic model is the one this file is written in (see above)
func decodeDashboard(raw []byte) (*dashboard.Dashboard, error) {
	rt := cog.NewRuntime()
	rt.RegisterPanelcfgVariant(timeseries.VariantConfig())
	rt.RegisterDataqueryVariant(grafanaprom.VariantConfig())
	var d dashboard.Dashboard //lint:ignore SA1019 the classic model, as above
	err := d.UnmarshalJSONStrict(raw)
	// The SDK returns its error list as an error even when the list is empty.
	var list cog.BuildErrors
	if errors.As(err, &list) && len(list) == 0 {
		err = nil
	}
	return &d, err
}

// TestDashboard decodes the dashboard strictly with Grafana's foundation SDK (the dashboard,
// its timeseries panels' options and its Prometheus queries: an unknown field fails), then
// runs checkDashboard with the production overlay's registry and rules.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := decodeDashboard(raw)
	if err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if strict.Uid == nil || *strict.Uid == "" || strict.Title == nil {
		t.Error("the dashboard needs a uid and a title")
	}
	var d dashJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if p.Type != "row" && p.Type != "timeseries" {
			t.Errorf("panel %q is a %s: only timeseries panels are decoded strictly here", p.Title, p.Type)
		}
	}
	b := build(t, "overlays/production")
	_, recorded := ruleExprs(b.rules[0])
	qc := queryContext{families: workerMetrics(t), recorded: recorded, providerIDs: registryOf(t, b).IDs()}
	for _, err := range checkDashboard(d, qc) {
		t.Error(err)
	}
}

// TestDashboardChecksCatchBreakage: a panel without a datasource, an empty query, a summed
// queue gauge and a provider panel that ignores $provider are each caught.
func TestDashboardChecksCatchBreakage(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	b := build(t, "overlays/production")
	_, recorded := ruleExprs(b.rules[0])
	qc := queryContext{families: workerMetrics(t), recorded: recorded, providerIDs: registryOf(t, b).IDs()}
	find := func(d *dashJSON, title string) *dashPanel {
		for i := range d.Panels {
			if d.Panels[i].Title == title {
				return &d.Panels[i]
			}
		}
		t.Fatalf("no panel %q", title)
		return nil
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["panels"].([]any)[1].(map[string]any)["targets"].([]any)[0].(map[string]any)["expresion"] = "up"
	misspelt, _ := json.Marshal(doc)
	if _, err := decodeDashboard(misspelt); err == nil || !strings.Contains(err.Error(), "expresion") {
		t.Errorf("strict decoding of a query with a misspelt field: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(d *dashJSON)
		want   string
	}{
		{"no datasource", func(d *dashJSON) { find(d, "Redis errors").Datasource = nil }, "want the ${datasource}"},
		{"empty query", func(d *dashJSON) { find(d, "Replicas").Targets[0].Expr = " " }, "empty query"},
		{"queue gauge summed", func(d *dashJSON) {
			p := find(d, "Lag per stream")
			p.Targets[0].Expr = strings.Replace(p.Targets[0].Expr, "max by", "sum by", 1)
		}, "take max"},
		{"provider panel ignores $provider", func(d *dashJSON) {
			p := find(d, "Request rate")
			p.Targets[0].Expr = strings.ReplaceAll(p.Targets[0].Expr, `, provider="$provider"`, "")
		}, `not filtered by provider`},
		{"renamed metric", func(d *dashJSON) {
			p := find(d, "In flight against the limit")
			p.Targets[0].Expr = strings.ReplaceAll(p.Targets[0].Expr, "webpush_inflight_requests", "webpush_in_flight")
		}, "webpush_in_flight is not one the worker exposes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d dashJSON
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			tc.mutate(&d)
			got := fmt.Sprint(checkDashboard(d, qc))
			if !strings.Contains(got, tc.want) {
				t.Fatalf("checks gave %s, want an error mentioning %q", got, tc.want)
			}
		})
	}
}
