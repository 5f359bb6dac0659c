package cli

import "github.com/webpush-gateway/webpush-gateway/providers"

// nearest is the command of cmds (hidden ones aside) whose name is nearest to word, when it is
// at most 2 edits (insertions, deletions, substitutions, swaps of adjacent bytes;
// providers.EditDistance) away: what "did you mean" names. The first of equally near ones
// wins; "" when none is near.
func nearest(word string, cmds []Command) string {
	best, bestD := "", 3
	for _, c := range cmds {
		if c.Hidden {
			continue
		}
		if d := providers.EditDistance(word, c.Name); d < bestD {
			best, bestD = c.Name, d
		}
	}
	return best
}
