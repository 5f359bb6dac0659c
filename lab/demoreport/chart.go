package demoreport

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
	"time"
)

// The chart is laid out once, in pixels of a width x height image; the SVG uses these numbers as
// user units, so both renderers agree to the pixel.
const (
	width  = 1200
	height = 700

	plotLeft    = 72   // room for the y tick labels and the breaker row names
	plotRight   = 1000 // the legend lives to the right of this
	plotTop     = 52
	legendLeft  = 1016
	legendRight = width - 8
	stripBottom = height - 12
	stripMaxH   = 200 // the strip gives up row height before it takes room from the lines
	rowMaxH     = 22
	rowGap      = 6
	charW       = 7 // basicfont.Face7x13 advance; the SVG font is sized to match
	seriesWidth = 2.5
)

type point struct{ X, Y float64 }

type box struct{ X, Y, W, H float64 }

func (b box) right() float64  { return b.X + b.W }
func (b box) bottom() float64 { return b.Y + b.H }

type anchor int

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

// attr is an SVG attribute that carries data for readers of the page's markup (tests, scripts a
// reader might run); the PNG has nowhere to put it and ignores it.
type attr struct{ name, value string }

// canvas is what the chart needs from a renderer. Groups and titles exist only in the SVG; the
// raster canvas draws their contents and drops the rest.
type canvas interface {
	group(class, title string, attrs ...attr)
	end()
	rect(b box, fill color.RGBA, title string, attrs ...attr)
	polyline(pts []point, stroke color.RGBA, width float64)
	text(at point, s string, a anchor, fill color.RGBA)
}

// chart is a Report laid out on the canvas.
type chart struct {
	r         Report
	withTitle bool // the page shows the title as a heading; the PNG has to carry it itself
	providers []string
	colors    map[string]color.RGBA
	end       time.Duration // length of the time axis
	plot      box           // the throughput lines
	strip     box           // the breaker rows, empty when no provider is known
	rowH      float64
	y         yScale
	xTicks    []float64 // seconds
}

func newChart(r Report, withTitle bool) *chart {
	c := &chart{
		r:         r,
		withTitle: withTitle,
		providers: r.providers(),
		end:       r.extent(),
		y:         newYScale(r.Series),
	}
	c.colors = colorsFor(c.providers)
	// A tick past the end would be drawn at the right edge with the wrong number.
	c.xTicks = slices.DeleteFunc(linearTicks(c.end.Seconds(), 10), func(s float64) bool {
		return s > c.end.Seconds()+1e-9
	})

	plotBottom := float64(stripBottom - 36) // room for the time axis labels
	if n := float64(len(c.providers)); n > 0 {
		c.rowH = math.Floor(min(rowMaxH, stripMaxH/n))
		h := c.rowH * n
		c.strip = box{X: plotLeft, Y: stripBottom - h, W: plotRight - plotLeft, H: h}
		plotBottom = c.strip.Y - 56 // the time axis labels and the strip's heading
	}
	c.plot = box{X: plotLeft, Y: plotTop, W: plotRight - plotLeft, H: plotBottom - plotTop}
	return c
}

func (c *chart) xOf(t time.Duration) float64 {
	return c.plot.X + c.plot.W*min(max(t.Seconds()/c.end.Seconds(), 0), 1)
}

func (c *chart) yOf(v float64) float64 { return c.plot.bottom() - c.plot.H*c.y.frac(v) }

// bottom is where the time axis ends downwards: the last breaker row, or the plot without rows.
func (c *chart) bottom() float64 {
	if len(c.providers) == 0 {
		return c.plot.bottom()
	}
	return c.strip.bottom()
}

// until resolves the "To == 0 means until the end" convention of Window and BreakerSpan.
func (c *chart) until(to time.Duration) time.Duration {
	if to == 0 {
		return c.end
	}
	return to
}

func (c *chart) draw(cv canvas) {
	cv.rect(box{W: width, H: height}, backgroundColor, "")
	if c.withTitle {
		cv.text(point{plotLeft, 20}, c.r.Title, anchorStart, textColor)
		if !c.r.Generated.IsZero() {
			cv.text(point{legendRight, 20}, "generated "+c.r.Generated.UTC().Format(generatedLayout), anchorEnd, mutedTextColor)
		}
	}
	if c.r.hasFault() {
		c.drawFault(cv)
	}
	c.drawAxes(cv)
	c.drawSeries(cv)
	c.drawBreakers(cv)
	c.drawLegend(cv)
}

const generatedLayout = "2006-01-02 15:04:05 MST"

// drawFault shades the fault window over both the lines and the breaker strip, so a reader sees
// the drop and the breaker opening line up with it.
func (c *chart) drawFault(cv canvas) {
	from, to := c.r.Fault.From, c.until(c.r.Fault.To)
	cv.group("fault", "", attr{"data-fault-from-ms", fmt.Sprint(from.Milliseconds())},
		attr{"data-fault-to-ms", fmt.Sprint(to.Milliseconds())})
	defer cv.end()

	x0, x1 := c.xOf(from), c.xOf(to)
	bottom := c.bottom()
	cv.rect(box{X: x0, Y: c.plot.Y, W: x1 - x0, H: bottom - c.plot.Y}, faultColor, "")
	cv.rect(box{X: math.Round(x0), Y: c.plot.Y, W: 1, H: bottom - c.plot.Y}, faultEdgeColor, "")
	cv.rect(box{X: math.Round(x1) - 1, Y: c.plot.Y, W: 1, H: bottom - c.plot.Y}, faultEdgeColor, "")

	label := c.r.Fault.Label
	if label == "" {
		label = "fault"
	}
	label = fmt.Sprintf("%s (%ss-%ss)", label, fmtNum(from.Seconds()), fmtNum(to.Seconds()))
	// Keep the label inside the plot when the window sits at its right edge.
	lx := min(x0+5, c.plot.right()-textWidth(label)-4)
	cv.text(point{max(lx, c.plot.X+4), c.plot.Y + 14}, label, anchorStart, faultTextColor)
}

func (c *chart) drawAxes(cv canvas) {
	gridBottom := c.bottom()
	for _, v := range c.y.ticks {
		y := math.Round(c.yOf(v))
		cv.rect(box{X: c.plot.X, Y: y, W: c.plot.W, H: 1}, gridColor, "")
		cv.rect(box{X: c.plot.X - 5, Y: y, W: 5, H: 1}, axisColor, "")
		cv.text(point{c.plot.X - 8, y + 4}, fmtNum(v), anchorEnd, textColor)
	}
	for _, s := range c.xTicks {
		x := math.Round(c.xOf(time.Duration(s * float64(time.Second))))
		cv.rect(box{X: x, Y: c.plot.Y, W: 1, H: gridBottom - c.plot.Y}, gridColor, "")
		cv.rect(box{X: x, Y: c.plot.bottom(), W: 1, H: 5}, axisColor, "")
		cv.text(point{x, c.plot.bottom() + 18}, fmtNum(s), anchorMiddle, textColor)
	}
	cv.rect(box{X: c.plot.X, Y: c.plot.Y, W: 1, H: c.plot.H + 1}, axisColor, "")
	cv.rect(box{X: c.plot.X, Y: c.plot.bottom(), W: c.plot.W, H: 1}, axisColor, "")

	unit := "messages/s"
	if c.y.log {
		unit += " (log scale)"
	}
	cv.text(point{8, plotTop - 10}, unit, anchorStart, mutedTextColor)
	cv.text(point{c.plot.X + c.plot.W/2, c.plot.bottom() + 34}, "time since start (s)", anchorMiddle, mutedTextColor)
}

func (c *chart) drawSeries(cv canvas) {
	drawn := false
	for _, s := range c.r.Series {
		pts := c.seriesPoints(s)
		if len(pts) == 0 {
			continue
		}
		drawn = true
		cv.group("series", s.Provider, attr{"data-provider", s.Provider})
		cv.polyline(pts, c.colors[s.Provider], seriesWidth)
		cv.end()
	}
	if !drawn {
		cv.text(point{c.plot.X + c.plot.W/2, c.plot.Y + c.plot.H/2}, "no throughput data", anchorMiddle, mutedTextColor)
	}
}

// seriesPoints puts each bucket's rate at the middle of its bucket. A single bucket becomes a
// flat segment across it, because one point would draw nothing.
func (c *chart) seriesPoints(s Series) []point {
	step := c.r.Step
	if len(s.Rate) == 1 {
		y := c.yOf(s.Rate[0])
		return []point{{c.xOf(0), y}, {c.xOf(step), y}}
	}
	pts := make([]point, 0, len(s.Rate))
	for i, v := range s.Rate {
		pts = append(pts, point{c.xOf(time.Duration(i)*step + step/2), c.yOf(v)})
	}
	return pts
}

func (c *chart) drawBreakers(cv canvas) {
	if len(c.providers) == 0 {
		return
	}
	cv.text(point{c.plot.X, c.strip.Y - 8}, "circuit breaker state", anchorStart, mutedTextColor)
	barH := max(c.rowH-rowGap, 2)
	for i, p := range c.providers {
		y := c.strip.Y + float64(i)*c.rowH + (c.rowH-barH)/2
		cv.group("breaker", p, attr{"data-provider", p})
		cv.rect(box{X: c.strip.X, Y: y, W: c.strip.W, H: barH}, noDataColor, "")
		for _, b := range c.r.Breakers {
			if b.Provider != p || b.From >= c.end {
				continue
			}
			to := min(c.until(b.To), c.end)
			x0, x1 := c.xOf(b.From), c.xOf(to)
			title := fmt.Sprintf("%s %s %ss-%ss", p, b.State, fmtNum(b.From.Seconds()), fmtNum(to.Seconds()))
			cv.rect(box{X: x0, Y: y, W: x1 - x0, H: barH}, stateColor(b.State), title,
				attr{"data-state", b.State},
				attr{"data-from-ms", fmt.Sprint(b.From.Milliseconds())},
				attr{"data-to-ms", fmt.Sprint(to.Milliseconds())})
		}
		cv.text(point{c.plot.X - 8, y + barH/2 + 4}, clip(p, 9), anchorEnd, textColor)
		cv.end()
	}
}

func (c *chart) drawLegend(cv canvas) {
	cv.group("legend", "")
	defer cv.end()
	y := c.plot.Y + 4
	if len(c.r.Series) > 0 {
		cv.text(point{legendLeft, y}, "throughput (avg)", anchorStart, mutedTextColor)
		for _, s := range c.r.Series {
			y += 18
			cv.rect(box{X: legendLeft, Y: y - 5, W: 22, H: 3}, c.colors[s.Provider], "")
			cv.text(point{legendLeft + 28, y}, clip(s.Provider, 13), anchorStart, textColor)
			cv.text(point{legendRight, y}, fmtRate(mean(s.Rate))+"/s", anchorEnd, textColor)
		}
		y += 30
	}
	if len(c.providers) > 0 {
		y = c.drawStateLegend(cv, y) + 30
	}
	if c.r.hasFault() {
		cv.rect(box{X: legendLeft, Y: y - 9, W: 22, H: 10}, faultColor, "")
		cv.text(point{legendLeft + 28, y}, "fault window", anchorStart, faultTextColor)
	}
}

// drawStateLegend lists the breaker states from y down and returns the last line's y.
func (c *chart) drawStateLegend(cv canvas, y float64) float64 {
	cv.text(point{legendLeft, y}, "breaker", anchorStart, mutedTextColor)
	states := slices.Clone(stateOrder)
	for _, b := range c.r.Breakers {
		if !slices.Contains(states, b.State) {
			states = append(states, b.State)
		}
	}
	for _, st := range states {
		y += 18
		cv.rect(box{X: legendLeft, Y: y - 9, W: 22, H: 10}, stateColor(st), "")
		cv.text(point{legendLeft + 28, y}, clip(st, 20), anchorStart, textColor)
	}
	y += 18
	cv.rect(box{X: legendLeft, Y: y - 9, W: 22, H: 10}, noDataColor, "")
	cv.text(point{legendLeft + 28, y}, "no data", anchorStart, textColor)
	return y
}

// yScale maps a rate to a fraction of the plot height.
//
// When the busiest provider sends many times more than the quietest one (fcm at 200/s next to
// a fallback at 3/s), a linear axis would press the quiet providers into a few pixels above zero
// and a reader could not tell them apart or see that they stayed flat. The scale then becomes
// log(1+v): each provider gets its own band, and zero (a provider that stopped) still sits on
// the axis.
type yScale struct {
	log   bool
	top   float64
	ticks []float64
}

// logSpread is how many times the busiest provider's peak must exceed the quietest one's before
// the axis turns logarithmic.
const logSpread = 8

func newYScale(series []Series) yScale {
	peak, quietest := 0.0, math.Inf(1)
	for _, s := range series {
		if len(s.Rate) == 0 {
			continue
		}
		m := slices.Max(s.Rate)
		peak = max(peak, m)
		if m > 0 {
			quietest = min(quietest, m)
		}
	}
	if peak > 0 && peak/quietest > logSpread {
		return logScale(peak)
	}
	ticks := linearTicks(max(peak*1.05, 1), 6)
	return yScale{top: ticks[len(ticks)-1], ticks: ticks}
}

func (s yScale) frac(v float64) float64 {
	if s.log {
		return math.Log1p(v) / math.Log1p(s.top)
	}
	return v / s.top
}

// logScale puts ticks at 0, 1, 2, 5, 10, 20, 50, ... up to the first one above peak, and keeps
// only the powers of ten when that would crowd the axis.
func logScale(peak float64) yScale {
	ticks := []float64{0}
	for decade := 1.0; ticks[len(ticks)-1] < peak*1.05; decade *= 10 {
		ticks = append(ticks, decade, 2*decade, 5*decade)
	}
	for len(ticks) > 1 && ticks[len(ticks)-2] >= peak*1.05 {
		ticks = ticks[:len(ticks)-1]
	}
	top := ticks[len(ticks)-1]
	if len(ticks) > 10 {
		ticks = slices.DeleteFunc(ticks, func(v float64) bool {
			return v != 0 && v != top && math.Log10(v) != math.Round(math.Log10(v))
		})
	}
	return yScale{log: true, top: top, ticks: ticks}
}

// linearTicks returns 0, step, 2*step, ... covering [0, upTo] with a 1-2-5 step that gives at
// most about want intervals.
func linearTicks(upTo float64, want int) []float64 {
	step := niceStep(upTo / float64(want))
	n := int(math.Ceil(upTo/step - 1e-9))
	ticks := make([]float64, 0, n+1)
	for i := range n + 1 {
		// Multiplying rather than accumulating keeps 0.1-steps free of float drift.
		ticks = append(ticks, float64(i)*step)
	}
	return ticks
}

func niceStep(rough float64) float64 {
	if rough <= 0 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(rough)))
	switch f := rough / mag; {
	case f <= 1:
		return mag
	case f <= 2:
		return 2 * mag
	case f <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// fmtNum prints an axis value without float noise: 0.30000000000000004 is 0.3, 15000 is 15k.
func fmtNum(v float64) string {
	switch {
	case v >= 10000:
		return trimZeros(fmt.Sprintf("%.1f", v/1000)) + "k"
	default:
		return trimZeros(fmt.Sprintf("%.2f", v))
	}
}

// fmtRate prints a rate with the precision a reader can use: 201, 55.0, 3.0.
func fmtRate(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func textWidth(s string) float64 { return float64(charW * len([]rune(s))) }

// clip shortens names that would run into the neighbouring column.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "~"
}
