package demoreport

import (
	"fmt"
	"image/color"
)

// Provider colors are fixed so that fcm is the same blue in every report a reader compares. They
// come from the Okabe-Ito palette, which stays distinguishable with the common color-vision
// deficiencies, and none of them is the red or amber of a breaker state.
var providerColors = map[string]color.RGBA{
	"fcm":      rgb(0x00, 0x72, 0xB2), // blue
	"autopush": rgb(0xE6, 0x61, 0x00), // orange
	"apple":    rgb(0x33, 0x33, 0x33), // near black
	"wns":      rgb(0x00, 0x9E, 0x73), // bluish green
	"fallback": rgb(0xCC, 0x79, 0xA7), // reddish purple
}

// extraColors go, in order of first appearance, to providers outside providerColors.
var extraColors = []color.RGBA{
	rgb(0x56, 0xB4, 0xE9), // sky blue
	rgb(0x8C, 0x56, 0x4B), // brown
	rgb(0x7F, 0x3C, 0x8D), // purple
	rgb(0xB8, 0x86, 0x0B), // dark goldenrod
	rgb(0x17, 0xBE, 0xCF), // cyan
	rgb(0x99, 0x99, 0x33), // olive
}

// Breaker state colors: closed is quiet because it is the normal state; open and half-open are
// what a reader looks for.
var stateColors = map[string]color.RGBA{
	"closed":    rgb(0xB4, 0xCF, 0xB8), // grey-green
	"open":      rgb(0xD6, 0x27, 0x28), // red
	"half-open": rgb(0xF2, 0xA9, 0x00), // amber
}

var (
	stateUnknownColor = rgb(0x99, 0x99, 0x99) // a state name the legend does not know
	noDataColor       = rgb(0xF0, 0xF0, 0xF0) // breaker row background: no span recorded
	faultColor        = rgb(0xFA, 0xE1, 0xE1) // fault window shading
	faultEdgeColor    = rgb(0xE0, 0x9A, 0x9A)
	faultTextColor    = rgb(0xA3, 0x1F, 0x1F)
	backgroundColor   = rgb(0xFF, 0xFF, 0xFF)
	gridColor         = rgb(0xE4, 0xE4, 0xE4)
	axisColor         = rgb(0x55, 0x55, 0x55)
	textColor         = rgb(0x22, 0x22, 0x22)
	mutedTextColor    = rgb(0x66, 0x66, 0x66)
)

// stateOrder is the order of the breaker legend: from normal to tripped.
var stateOrder = []string{"closed", "half-open", "open"}

func rgb(r, g, b uint8) color.RGBA { return color.RGBA{R: r, G: g, B: b, A: 0xFF} }

// colorsFor gives each provider its fixed color, or the next unused extra color.
func colorsFor(providers []string) map[string]color.RGBA {
	colors := make(map[string]color.RGBA, len(providers))
	next := 0
	for _, p := range providers {
		if c, ok := providerColors[p]; ok {
			colors[p] = c
			continue
		}
		colors[p] = extraColors[next%len(extraColors)]
		next++
	}
	return colors
}

func stateColor(state string) color.RGBA {
	if c, ok := stateColors[state]; ok {
		return c
	}
	return stateUnknownColor
}

// hex is the CSS form of c.
func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }
