package demoreport

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"slices"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// PNG renders the report's chart (throughput lines per provider, the shaded fault window, a
// breaker timeline per provider and the legend) as a width x height PNG. The tables of the HTML
// page are not part of it. It returns an error wrapping [ErrInvalid] for a report that cannot be
// drawn; an empty report gives an empty chart.
func PNG(r Report) ([]byte, error) {
	if err := validate(r); err != nil {
		return nil, err
	}
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	newChart(r, true).draw(&rasterCanvas{img: img, z: vector.NewRasterizer(width, height)})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("demoreport: encode png: %w", err)
	}
	return buf.Bytes(), nil
}

// rasterCanvas draws rectangles on whole pixels, so that grid lines and breaker spans stay crisp,
// and anti-aliases only the series lines, which are the only slanted shapes.
type rasterCanvas struct {
	img *image.RGBA
	z   *vector.Rasterizer // reused for every line, so its coverage buffer is allocated once
}

func (rc *rasterCanvas) group(string, string, ...attr) {}
func (rc *rasterCanvas) end()                          {}

func (rc *rasterCanvas) rect(b box, fill color.RGBA, _ string, _ ...attr) {
	x0, y0 := int(math.Round(b.X)), int(math.Round(b.Y))
	x1, y1 := int(math.Round(b.right())), int(math.Round(b.bottom()))
	// A breaker that was open for a moment is still an event a reader must see.
	if b.W > 0 && x1 == x0 {
		x1++
	}
	if b.H > 0 && y1 == y0 {
		y1++
	}
	draw.Draw(rc.img, image.Rect(x0, y0, x1, y1), image.NewUniform(fill), image.Point{}, draw.Src)
}

// polyline strokes the line as one filled shape: a rectangle along each segment and an octagon
// at each vertex for round joins and caps. All pieces share one winding direction, so where they
// overlap the rasterizer's coverage saturates instead of cancelling.
func (rc *rasterCanvas) polyline(pts []point, stroke color.RGBA, lineWidth float64) {
	h := lineWidth / 2
	rc.z.Reset(width, height)
	for i, p := range pts {
		rc.fill(octagon(p, h))
		if i == 0 {
			continue
		}
		q := pts[i-1]
		dx, dy := p.X-q.X, p.Y-q.Y
		l := math.Hypot(dx, dy)
		if l == 0 {
			continue
		}
		nx, ny := -dy/l*h, dx/l*h
		rc.fill([]point{{q.X + nx, q.Y + ny}, {p.X + nx, p.Y + ny}, {p.X - nx, p.Y - ny}, {q.X - nx, q.Y - ny}})
	}
	rc.z.Draw(rc.img, rc.img.Bounds(), image.NewUniform(stroke), image.Point{})
}

// fill adds a closed polygon to the rasterizer, turned counter-clockwise if it is not.
func (rc *rasterCanvas) fill(poly []point) {
	area := 0.0
	for i, p := range poly {
		q := poly[(i+1)%len(poly)]
		area += p.X*q.Y - q.X*p.Y
	}
	if area < 0 {
		slices.Reverse(poly)
	}
	rc.z.MoveTo(float32(poly[0].X), float32(poly[0].Y))
	for _, p := range poly[1:] {
		rc.z.LineTo(float32(p.X), float32(p.Y))
	}
	rc.z.ClosePath()
}

func octagon(c point, r float64) []point {
	poly := make([]point, 8)
	for k := range poly {
		a := float64(k) * math.Pi / 4
		poly[k] = point{c.X + r*math.Cos(a), c.Y + r*math.Sin(a)}
	}
	return poly
}

func (rc *rasterCanvas) text(at point, s string, a anchor, fill color.RGBA) {
	d := font.Drawer{Dst: rc.img, Src: image.NewUniform(fill), Face: basicfont.Face7x13}
	x := at.X
	switch adv := float64(d.MeasureString(s)) / 64; a {
	case anchorMiddle:
		x -= adv / 2
	case anchorEnd:
		x -= adv
	}
	d.Dot = fixed.P(int(math.Round(x)), int(math.Round(at.Y)))
	d.DrawString(s)
}
