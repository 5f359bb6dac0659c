package demoreport

import (
	"fmt"
	"html"
	"image/color"
	"strconv"
	"strings"
)

// svgNS is the only URL the page contains; browsers ignore it for inline SVG, but it keeps the
// markup valid if someone saves the SVG on its own.
const svgNS = "http://www.w3.org/2000/svg"

// renderSVG draws the chart as inline SVG markup. Every string that reaches the markup goes
// through html.EscapeString, which also makes it safe inside quoted attributes.
func renderSVG(c *chart) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-family="monospace" font-size="12">`,
		svgNS, width, height, width, height, esc(c.r.Title+" throughput per provider"))
	b.WriteByte('\n')
	c.draw(&svgCanvas{b: &b})
	b.WriteString("</svg>")
	return b.String()
}

type svgCanvas struct{ b *strings.Builder }

func (s *svgCanvas) group(class, title string, attrs ...attr) {
	fmt.Fprintf(s.b, `<g class="%s"%s>`, esc(class), attrString(attrs))
	if title != "" {
		fmt.Fprintf(s.b, "<title>%s</title>", esc(title))
	}
	s.b.WriteByte('\n')
}

func (s *svgCanvas) end() { s.b.WriteString("</g>\n") }

func (s *svgCanvas) rect(bx box, fill color.RGBA, title string, attrs ...attr) {
	fmt.Fprintf(s.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s`,
		num(bx.X), num(bx.Y), num(max(bx.W, 0)), num(max(bx.H, 0)), hex(fill), attrString(attrs))
	if title == "" {
		s.b.WriteString("/>\n")
		return
	}
	fmt.Fprintf(s.b, "><title>%s</title></rect>\n", esc(title))
}

func (s *svgCanvas) polyline(pts []point, stroke color.RGBA, width float64) {
	fmt.Fprintf(s.b, `<polyline fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round" stroke-linecap="round" points="`,
		hex(stroke), num(width))
	for i, p := range pts {
		if i > 0 {
			s.b.WriteByte(' ')
		}
		s.b.WriteString(num(p.X) + "," + num(p.Y))
	}
	s.b.WriteString(`"/>` + "\n")
}

func (s *svgCanvas) text(at point, str string, a anchor, fill color.RGBA) {
	fmt.Fprintf(s.b, `<text x="%s" y="%s" text-anchor="%s" fill="%s">%s</text>`+"\n",
		num(at.X), num(at.Y), anchorName[a], hex(fill), esc(str))
}

var anchorName = map[anchor]string{anchorStart: "start", anchorMiddle: "middle", anchorEnd: "end"}

func attrString(attrs []attr) string {
	var b strings.Builder
	for _, a := range attrs {
		fmt.Fprintf(&b, ` %s="%s"`, a.name, esc(a.value))
	}
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }

// num prints a coordinate with the tenth of a pixel that is all a screen can show.
func num(v float64) string { return trimZeros(strconv.FormatFloat(v, 'f', 1, 64)) }
