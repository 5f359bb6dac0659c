package demoreport

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sampleReport is what a demo with a 30 s Autopush stall looks like: fcm carries most of the
// traffic, the others are an order of magnitude quieter, and Autopush drops to zero while its
// breaker opens, probes and closes again once the fault ends.
func sampleReport() Report {
	rng := rand.New(rand.NewPCG(5, 29))
	const buckets = 90
	rates := func(base, jitter float64, zero func(i int) bool) []float64 {
		v := make([]float64, buckets)
		for i := range v {
			if zero != nil && zero(i) {
				continue
			}
			v[i] = base + jitter*(2*rng.Float64()-1)
		}
		return v
	}
	inFault := func(i int) bool { return i >= 30 && i < 60 }
	return Report{
		Title:     "webpush-gateway demo",
		Generated: time.Date(2026, 11, 29, 14, 5, 0, 0, time.UTC),
		Setup: []string{
			"redis: started a throwaway redis-server at redis://127.0.0.1:6379/0",
			"rate: 285 msg/s for 90s, 5 providers via pushsim",
			"fault: autopush stalls every request from 30s to 60s",
		},
		Step:     time.Second,
		Duration: buckets * time.Second,
		Series: []Series{
			{Provider: "fcm", Rate: rates(200, 8, nil)},
			{Provider: "autopush", Rate: rates(55, 4, inFault)},
			{Provider: "apple", Rate: rates(17, 1.5, nil)},
			{Provider: "wns", Rate: rates(9, 1, nil)},
			{Provider: "fallback", Rate: rates(3, 0.5, nil)},
		},
		Fault: Window{From: 30 * time.Second, To: 60 * time.Second, Label: "fault: autopush stall"},
		Breakers: []BreakerSpan{
			{Provider: "fcm", State: "closed"},
			{Provider: "autopush", State: "closed", To: 32 * time.Second},
			{Provider: "autopush", State: "open", From: 32 * time.Second, To: 42 * time.Second},
			{Provider: "autopush", State: "half-open", From: 42 * time.Second, To: 43 * time.Second},
			{Provider: "autopush", State: "open", From: 43 * time.Second, To: 53 * time.Second},
			{Provider: "autopush", State: "half-open", From: 53 * time.Second, To: 54 * time.Second},
			{Provider: "autopush", State: "open", From: 54 * time.Second, To: 64 * time.Second},
			{Provider: "autopush", State: "half-open", From: 64 * time.Second, To: 65 * time.Second},
			{Provider: "autopush", State: "closed", From: 65 * time.Second},
			{Provider: "apple", State: "closed"},
			{Provider: "wns", State: "closed"},
			{Provider: "fallback", State: "closed"},
		},
		Providers: []ProviderSummary{
			{Provider: "fcm", Sent: 18000, P50: 41 * time.Millisecond, P99: 180 * time.Millisecond,
				Outcomes: map[string]int{"ACCEPTED": 17950, "GONE": 40, "EXPIRED": 10}},
			{Provider: "autopush", Sent: 4950, P50: 38 * time.Millisecond, P99: 10 * time.Second,
				Outcomes: map[string]int{"ACCEPTED": 3300, "TIMEOUT": 150, "CIRCUIT_OPEN": 1400, "PROVIDER_UNAVAILABLE": 100}},
			{Provider: "apple", Sent: 1530, P50: 52 * time.Millisecond, P99: 210 * time.Millisecond,
				Outcomes: map[string]int{"ACCEPTED": 1528, "GONE": 2}},
			{Provider: "wns", Sent: 810, P50: 61 * time.Millisecond, P99: 240 * time.Millisecond,
				Outcomes: map[string]int{"ACCEPTED": 810}},
			{Provider: "fallback", Sent: 270, P50: 35 * time.Millisecond, P99: 120 * time.Millisecond,
				Outcomes: map[string]int{"ACCEPTED": 269, "EXPIRED": 1}},
		},
	}
}

func renderHTML(t *testing.T, r Report) string {
	t.Helper()
	b, err := HTML(r)
	if err != nil {
		t.Fatalf("HTML: %v", err)
	}
	page := string(b)
	checkSVGWellFormed(t, page)
	return page
}

// checkSVGWellFormed parses the page's SVG as strict XML: a browser forgives broken markup, a
// reader who saves the SVG on its own does not get that help.
func checkSVGWellFormed(t *testing.T, page string) {
	t.Helper()
	i, j := strings.Index(page, "<svg"), strings.LastIndex(page, "</svg>")
	if i < 0 || j < i {
		t.Fatalf("page has no <svg>...</svg>")
	}
	d := xml.NewDecoder(strings.NewReader(page[i : j+len("</svg>")]))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
}

func TestHTMLHasSeriesPerProviderAndFaultWindow(t *testing.T) {
	page := renderHTML(t, sampleReport())
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "fallback"} {
		if n := strings.Count(page, `<g class="series" data-provider="`+p+`"`); n != 1 {
			t.Errorf("series groups for %q: got %d, want 1", p, n)
		}
	}
	if !strings.Contains(page, `<g class="fault" data-fault-from-ms="30000" data-fault-to-ms="60000">`) {
		t.Errorf("page has no fault element spanning 30000-60000 ms")
	}
	if !strings.Contains(page, "fault: autopush stall") {
		t.Errorf("page does not show the fault label")
	}
}

func TestHTMLHasBreakersTablesAndSetup(t *testing.T) {
	page := renderHTML(t, sampleReport())
	for _, p := range []string{"fcm", "autopush", "apple", "wns", "fallback"} {
		if n := strings.Count(page, `<g class="breaker" data-provider="`+p+`"`); n != 1 {
			t.Errorf("breaker rows for %q: got %d, want 1", p, n)
		}
	}
	for _, want := range []string{
		`data-state="open" data-from-ms="32000" data-to-ms="42000"`,
		`data-state="half-open" data-from-ms="42000" data-to-ms="43000"`,
		// To == 0 is resolved to the end of the run.
		`data-state="closed" data-from-ms="65000" data-to-ms="90000"`,
		// Codes: ACCEPTED first, the rest sorted.
		"<th>ACCEPTED</th><th>CIRCUIT_OPEN</th><th>EXPIRED</th><th>GONE</th><th>PROVIDER_UNAVAILABLE</th><th>TIMEOUT</th>",
		// fcm: 17950 of 18000 answers accepted, 40 gone.
		`<td>17950 <span class="pct">99.7%</span></td>`,
		`<td>40 <span class="pct">0.2%</span></td>`,
		`<td>1400 <span class="pct">28.3%</span></td>`,
		`<td class="zero">0</td>`,
		// p50 and p99 per provider.
		"<td>18000</td><td>41ms</td><td>180ms</td>",
		"<td>4950</td><td>38ms</td><td>10s</td>",
		"<li>fault: autopush stalls every request from 30s to 60s</li>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %s", want)
		}
	}
}

func TestHTMLEscapesText(t *testing.T) {
	r := sampleReport()
	r.Title = `<script>alert("t")</script>`
	r.Setup = append(r.Setup, `<img src=x onerror=alert(1)>`)
	r.Fault.Label = `stall & "drop" <b>`
	r.Series[0].Provider = `fcm"><script>`
	r.Providers[0].Provider = `fcm"><script>`
	r.Providers[0].Outcomes["<i>CODE</i>"] = 1

	page := renderHTML(t, r)
	for _, bad := range []string{"<script", "<img", "<b>", "<i>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "stall &amp; &#34;drop&#34; &lt;b&gt;", "&lt;i&gt;CODE&lt;/i&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain escaped %s", want)
		}
	}
}

func TestHTMLHasNoExternalURL(t *testing.T) {
	for name, r := range map[string]Report{"sample": sampleReport(), "empty": {}} {
		t.Run(name, func(t *testing.T) {
			page := renderHTML(t, r)
			if n := strings.Count(page, `xmlns="`+svgNS+`"`); n != 1 {
				t.Fatalf("SVG xmlns attributes: got %d, want 1", n)
			}
			rest := strings.Replace(page, `xmlns="`+svgNS+`"`, "", 1)
			for _, bad := range []string{"http://", "https://", "<script", "<link", "src=", "url(", "@import"} {
				if strings.Contains(rest, bad) {
					t.Errorf("page contains %q outside the SVG xmlns attribute", bad)
				}
			}
		})
	}
}

func TestHTMLIsDeterministic(t *testing.T) {
	first := renderHTML(t, sampleReport())
	// Outcomes are maps: a few renderings give their random iteration order room to show.
	for range 5 {
		if again := renderHTML(t, sampleReport()); again != first {
			t.Fatalf("two renderings of the same report differ")
		}
	}
}

func TestPNGHasSizeAndColors(t *testing.T) {
	b, err := PNG(sampleReport())
	if err != nil {
		t.Fatalf("PNG: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got, want := img.Bounds(), image.Rect(0, 0, width, height); got != want {
		t.Fatalf("bounds: got %v, want %v", got, want)
	}

	count := map[color.RGBA]int{}
	for y := range height {
		for x := range width {
			count[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	// The legend alone has about 66 pixels of each color; a line across the plot has far more.
	want := map[string]color.RGBA{"fault shading": faultColor}
	for p, c := range providerColors {
		want["provider "+p] = c
	}
	for s, c := range stateColors {
		want["breaker "+s] = c
	}
	for name, c := range want {
		if count[c] < 200 {
			t.Errorf("%s (%s): %d pixels, want at least 200", name, hex(c), count[c])
		}
	}
}

// TestQuietProvidersAreApart checks the property the log scale exists for: the flat lines of
// providers sending 3, 9 and 17 messages/s next to one sending 200 are far enough apart to tell
// at a glance.
func TestQuietProvidersAreApart(t *testing.T) {
	c := newChart(sampleReport(), true)
	if !c.y.log {
		t.Fatalf("y axis is linear for rates from 3 to 200/s")
	}
	rates := []float64{0, 3, 9, 17, 55, 200}
	for i := 1; i < len(rates); i++ {
		if gap := c.yOf(rates[i-1]) - c.yOf(rates[i]); gap < 25 {
			t.Errorf("%v/s and %v/s are %.1f px apart, want at least 25", rates[i-1], rates[i], gap)
		}
	}
	if top := c.yOf(c.y.top); math.Abs(top-c.plot.Y) > 0.5 {
		t.Errorf("axis top %v is drawn at y=%v, want the plot top %v", c.y.top, top, c.plot.Y)
	}
}

func TestTicks(t *testing.T) {
	labels := func(v []float64) []string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = fmtNum(x)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		got  []float64
		want []string
	}{
		{"90 s run", linearTicks(90, 10), []string{"0", "10", "20", "30", "40", "50", "60", "70", "80", "90"}},
		{"sub-second steps", linearTicks(1, 6), []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{"linear rates", linearTicks(210, 6), []string{"0", "50", "100", "150", "200", "250"}},
		{"log up to 200/s", logScale(200).ticks, []string{"0", "1", "2", "5", "10", "20", "50", "100", "200", "500"}},
		{"log just under a tick", logScale(95).ticks, []string{"0", "1", "2", "5", "10", "20", "50", "100"}},
		{"log over many decades", logScale(40000).ticks, []string{"0", "1", "10", "100", "1000", "10k", "50k"}},
	} {
		if diff := cmp.Diff(tc.want, labels(tc.got)); diff != "" {
			t.Errorf("%s: ticks (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestDegenerateReports(t *testing.T) {
	withSample := func(change func(*Report)) Report {
		r := sampleReport()
		change(&r)
		return r
	}
	for _, tc := range []struct {
		name    string
		r       Report
		wantErr bool
	}{
		{name: "zero report", r: Report{}},
		{name: "no series", r: withSample(func(r *Report) { r.Series = nil })},
		{name: "series without rates", r: withSample(func(r *Report) {
			for i := range r.Series {
				r.Series[i].Rate = nil
			}
		})},
		{name: "zero duration", r: withSample(func(r *Report) { r.Duration = 0 })},
		{name: "zero duration and step without rates", r: Report{Series: []Series{{Provider: "fcm"}}}},
		{name: "single bucket", r: Report{Step: time.Second, Series: []Series{{Provider: "fcm", Rate: []float64{4}}}}},
		{name: "all rates zero", r: Report{Step: time.Second, Duration: 3 * time.Second,
			Series: []Series{{Provider: "fcm", Rate: []float64{0, 0, 0}}}}},
		{name: "fault past the end", r: withSample(func(r *Report) { r.Fault = Window{From: time.Hour, To: 2 * time.Hour} })},
		{name: "fault until the end", r: withSample(func(r *Report) { r.Fault.To = 0 })},
		{name: "fault without label", r: withSample(func(r *Report) { r.Fault.Label = "" })},
		{name: "unknown providers and state", r: withSample(func(r *Report) {
			for i := range 8 {
				r.Series = append(r.Series, Series{Provider: fmt.Sprintf("self-hosted-%d", i), Rate: []float64{1, 2}})
			}
			r.Breakers = append(r.Breakers, BreakerSpan{Provider: "mystery", State: "tripped", From: 10 * time.Second})
		})},
		{name: "no answers yet", r: withSample(func(r *Report) {
			r.Providers = append(r.Providers, ProviderSummary{Provider: "wns", Outcomes: map[string]int{"ACCEPTED": 0}})
		})},
		{name: "rates without step", r: withSample(func(r *Report) { r.Step = 0 }), wantErr: true},
		{name: "negative step", r: withSample(func(r *Report) { r.Step = -time.Second }), wantErr: true},
		{name: "negative duration", r: withSample(func(r *Report) { r.Duration = -time.Second }), wantErr: true},
		{name: "NaN rate", r: withSample(func(r *Report) { r.Series[1].Rate[3] = math.NaN() }), wantErr: true},
		{name: "infinite rate", r: withSample(func(r *Report) { r.Series[1].Rate[3] = math.Inf(1) }), wantErr: true},
		{name: "negative rate", r: withSample(func(r *Report) { r.Series[1].Rate[3] = -1 }), wantErr: true},
		{name: "absurd rate", r: withSample(func(r *Report) { r.Series[1].Rate[3] = math.MaxFloat64 }), wantErr: true},
		{name: "absurd rate alone", r: Report{Step: time.Second, Series: []Series{{Provider: "fcm", Rate: []float64{math.MaxFloat64}}}}, wantErr: true},
		{name: "negative outcome count", r: withSample(func(r *Report) { r.Providers[0].Outcomes["GONE"] = -1 }), wantErr: true},
		{name: "fault ends before it starts", r: withSample(func(r *Report) { r.Fault.To = time.Second }), wantErr: true},
		{name: "breaker span ends before it starts", r: withSample(func(r *Report) {
			r.Breakers = append(r.Breakers, BreakerSpan{Provider: "fcm", State: "open", From: 5 * time.Second, To: time.Second})
		}), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			page, htmlErr := HTML(tc.r)
			img, pngErr := PNG(tc.r)
			if tc.wantErr {
				if !errors.Is(htmlErr, ErrInvalid) || !errors.Is(pngErr, ErrInvalid) {
					t.Fatalf("got errors (HTML %v, PNG %v), want both to wrap ErrInvalid", htmlErr, pngErr)
				}
				return
			}
			if htmlErr != nil || pngErr != nil {
				t.Fatalf("got errors (HTML %v, PNG %v), want none", htmlErr, pngErr)
			}
			if !strings.HasPrefix(string(page), "<!DOCTYPE html>") || !strings.Contains(string(page), "</html>") {
				t.Errorf("HTML is not a whole page")
			}
			checkSVGWellFormed(t, string(page))
			cfg, err := png.DecodeConfig(bytes.NewReader(img))
			if err != nil {
				t.Fatalf("decode PNG: %v", err)
			}
			if cfg.Width != width || cfg.Height != height {
				t.Errorf("PNG size: got %dx%d, want %dx%d", cfg.Width, cfg.Height, width, height)
			}
		})
	}
}
