package demoreport

import (
	"bytes"
	"fmt"
	"html/template"
	"slices"
	"time"
)

// HTML renders the report as one self-contained page: inline CSS, the chart as inline SVG, the
// setup lines, the outcome mix per provider and the p50/p99 latencies. The page loads nothing
// (no script, stylesheet, font or image) so it reads the same from a CI artifact offline. The
// same input always gives the same bytes. It returns an error wrapping [ErrInvalid] for a report
// that cannot be drawn; an empty report gives a page that says there is no data.
func HTML(r Report) ([]byte, error) {
	if err := validate(r); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, newPage(r)); err != nil {
		return nil, fmt.Errorf("demoreport: render page: %w", err)
	}
	return buf.Bytes(), nil
}

type page struct {
	Title     string
	Generated string
	Setup     []string
	Step      string
	Chart     template.HTML // built by renderSVG, which escapes every string it writes
	Codes     []string
	Rows      []row
}

type row struct {
	Provider string
	Color    string
	Answered int // sum of the outcome counts, what the percentages are of
	Cells    []cell
	Sent     int
	P50, P99 string
}

type cell struct {
	Count int
	Pct   string // of the provider's answers; empty for a zero count, which the page greys out
}

func newPage(r Report) page {
	p := page{
		Title: r.Title,
		Setup: r.Setup,
		Chart: template.HTML(renderSVG(newChart(r, false))),
		Codes: outcomeCodes(r.Providers),
	}
	if p.Title == "" {
		p.Title = "Demo report"
	}
	if !r.Generated.IsZero() {
		p.Generated = r.Generated.UTC().Format(generatedLayout)
	}
	if r.Step > 0 {
		p.Step = r.Step.String()
	}
	colors := colorsFor(r.providers())
	for _, s := range r.Providers {
		rw := row{Provider: s.Provider, Color: hex(colors[s.Provider]), Sent: s.Sent,
			P50: fmtLatency(s.P50), P99: fmtLatency(s.P99)}
		for _, n := range s.Outcomes {
			rw.Answered += n
		}
		for _, code := range p.Codes {
			c := cell{Count: s.Outcomes[code]}
			if c.Count > 0 {
				c.Pct = fmt.Sprintf("%.1f%%", 100*float64(c.Count)/float64(rw.Answered))
			}
			rw.Cells = append(rw.Cells, c)
		}
		p.Rows = append(p.Rows, rw)
	}
	return p
}

// outcomeCodes is every code any provider answered with: ACCEPTED first because it is what the
// reader compares everything else to, then the rest in alphabetical order.
func outcomeCodes(providers []ProviderSummary) []string {
	var codes []string
	for _, p := range providers {
		for code := range p.Outcomes {
			if code != "ACCEPTED" && !slices.Contains(codes, code) {
				codes = append(codes, code)
			}
		}
	}
	slices.Sort(codes)
	for _, p := range providers {
		if _, ok := p.Outcomes["ACCEPTED"]; ok {
			return append([]string{"ACCEPTED"}, codes...)
		}
	}
	return codes
}

// fmtLatency rounds a latency to three significant-ish digits; a zero means nothing was measured.
func fmtLatency(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto; max-width: 1240px; padding: 0 16px; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; }
.generated { color: #666; margin-top: 0; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { color: #666; font-size: 0.9em; margin-top: 4px; }
ul.setup { font-family: ui-monospace, monospace; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 4px 10px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #999; }
td.zero { color: #bbb; }
.pct { color: #666; font-size: 0.85em; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Generated}}<p class="generated">Generated {{.Generated}}</p>
{{end}}
{{- if .Setup}}<h2>Setup</h2>
<ul class="setup">
{{range .Setup}}<li>{{.}}</li>
{{end}}</ul>
{{end -}}
<h2>Throughput and circuit breakers</h2>
<figure>
{{.Chart}}
<figcaption>Lines: accepted and answered sends per second per provider{{if .Step}}, in {{.Step}} buckets{{end}}. Strips: each provider's circuit breaker state over the same time axis.</figcaption>
</figure>
<h2>Outcome mix</h2>
{{if .Rows}}<table class="outcomes">
<thead><tr><th>provider</th><th>answered</th>{{range .Codes}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr data-provider="{{.Provider}}"><td><span class="swatch" style="background: {{.Color}}"></span>{{.Provider}}</td><td>{{.Answered}}</td>
{{- range .Cells}}{{if .Count}}<td>{{.Count}} <span class="pct">{{.Pct}}</span></td>{{else}}<td class="zero">0</td>{{end}}{{end}}</tr>
{{end}}</tbody>
</table>
<h2>Latency, enqueue to answer</h2>
<table class="latency">
<thead><tr><th>provider</th><th>sent</th><th>p50</th><th>p99</th></tr></thead>
<tbody>
{{range .Rows}}<tr data-provider="{{.Provider}}"><td><span class="swatch" style="background: {{.Color}}"></span>{{.Provider}}</td><td>{{.Sent}}</td><td>{{.P50}}</td><td>{{.P99}}</td></tr>
{{end}}</tbody>
</table>
{{else}}<p>No provider answered.</p>
{{end}}</body>
</html>
`))
