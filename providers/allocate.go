package providers

import (
	"math"
	"slices"
)

// allocLimit bounds Allocate's inputs, which come from live counters and need not obey the
// registry's bounds: it keeps the arithmetic far from overflow.
const allocLimit = 1 << 20

// Allocate shares total in-flight slots of one replica among providers by weight (their
// recent traffic), within each provider's floor and ceiling. The providers are the union of the
// keys of the three maps; the result has one entry for each, and every entry is at least 1.
//
// Inputs are read leniently, because weights come from live counters:
//   - a weight that is missing, negative, NaN or infinite counts as 0;
//   - a ceiling (max_in_flight) that is missing or below 1 means no ceiling;
//   - a floor (min_in_flight) that is missing or below 1 is 1, and a floor above the
//     provider's ceiling is the ceiling (the ceiling bounds memory and sockets: it wins);
//   - total below 0 is 0; total, floors and ceilings above 1<<20 are 1<<20.
//
// When the floors fit in total (their sum is at most total), every provider gets its floor and
// the shares follow the weights: each provider gets clamp(λ·weight, floor, ceiling), with one λ
// for all chosen so that the shares add up to total, rounded to whole slots by largest
// remainder (ties go to the provider whose id sorts first). The sum is then exactly total, or
// the sum of the ceilings when that is smaller. Providers with weight 0 get their floor; when
// every weight is 0, or every provider with traffic is at its ceiling, what is left is split
// evenly among the rest.
//
// When the floors alone exceed total, the weights play no part: every provider gets its floor
// scaled by total/sum(floors), rounded by largest remainder but never below 1, and the sum is
// trimmed to total by taking one slot at a time from the providers rounded up the most (most
// above their exact share), ties to the id that sorts last. The sum is then total, or the
// number of providers when total is smaller than that (each still gets 1).
//
// In every case the sum is at most max(total, number of providers), and the result depends only
// on the arguments (no map iteration order leaks in).
func Allocate(total int, weights map[string]float64, floors map[string]int, ceilings map[string]int) map[string]int {
	ids := make([]string, 0, len(weights)+len(floors)+len(ceilings))
	for _, m := range []map[string]int{floors, ceilings} {
		for id := range m {
			ids = append(ids, id)
		}
	}
	for id := range weights {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	out := make(map[string]int, len(ids))
	if len(ids) == 0 {
		return out
	}

	total = clampInt(total, 0, allocLimit)
	n := len(ids)
	w := make([]float64, n)
	lo := make([]int, n) // floor
	hi := make([]int, n) // ceiling
	wmax, sumLo := 0.0, 0
	for i, id := range ids {
		if x := weights[id]; x > 0 && !math.IsInf(x, 0) {
			w[i] = x
			wmax = max(wmax, x)
		}
		hi[i] = allocLimit
		if c, ok := ceilings[id]; ok && c >= 1 {
			hi[i] = min(c, allocLimit)
		}
		lo[i] = clampInt(floors[id], 1, hi[i])
		sumLo += lo[i]
	}
	if wmax > 0 {
		// Scale to at most 1 so that summing many large weights cannot overflow to +Inf.
		for i := range w {
			w[i] /= wmax
		}
	}

	exact := make([]float64, n) // each provider's real-valued share
	if sumLo > total {
		for i := range exact {
			exact[i] = float64(lo[i]) * float64(total) / float64(sumLo)
			hi[i], lo[i] = lo[i], 1
		}
	} else {
		waterFill(exact, w, lo, hi, total)
	}
	got := settle(exact, lo, hi, total)
	for i, id := range ids {
		out[id] = got[i]
	}
	return out
}

// waterFill sets exact[i] = clamp(λ·w[i], lo[i], hi[i]) with λ such that the sum is total (or
// every provider is at its ceiling). Each round computes λ for the providers not yet pinned to a
// bound and pins the side that is violated more: when the shares below their floors miss more
// than the shares above their ceilings exceed, the true λ is smaller than this round's, so those
// below their floors stay there (and the other way round). A round pins at least one provider,
// so there are at most n rounds.
func waterFill(exact, w []float64, lo, hi []int, total int) {
	n := len(exact)
	pinned := make([]bool, n)
	rest := float64(total)
	for {
		var free []int
		wsum := 0.0
		for i := range n {
			if !pinned[i] {
				free = append(free, i)
				wsum += w[i]
			}
		}
		if len(free) == 0 {
			return
		}
		for _, i := range free {
			if wsum > 0 {
				exact[i] = rest * w[i] / wsum
			} else {
				exact[i] = rest / float64(len(free)) // no traffic seen: split evenly
			}
		}
		var under, over float64
		for _, i := range free {
			if exact[i] < float64(lo[i]) {
				under += float64(lo[i]) - exact[i]
			} else if exact[i] > float64(hi[i]) {
				over += exact[i] - float64(hi[i])
			}
		}
		if under == 0 && over == 0 {
			return
		}
		for _, i := range free {
			switch {
			case under >= over && exact[i] < float64(lo[i]):
				exact[i], pinned[i] = float64(lo[i]), true
			case over >= under && exact[i] > float64(hi[i]):
				exact[i], pinned[i] = float64(hi[i]), true
			default:
				continue
			}
			rest -= exact[i]
		}
	}
}

// settle rounds exact shares to whole slots within [lo, hi]: down first, then one slot at a
// time to the share rounded down the most until the sum is total, or away from the share
// rounded up the most while it is above total. It stops when no provider can move.
func settle(exact []float64, lo, hi []int, total int) []int {
	got := make([]int, len(exact))
	sum := 0
	for i, x := range exact {
		got[i] = clampInt(int(math.Floor(x)), lo[i], hi[i])
		sum += got[i]
	}
	for sum < total {
		best := -1
		for i := range got {
			if got[i] < hi[i] && (best < 0 || exact[i]-float64(got[i]) > exact[best]-float64(got[best])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		got[best]++
		sum++
	}
	for sum > total {
		best := -1
		for i := range got {
			// >= : among equals the id that sorts last gives a slot back, the mirror of the
			// tie-break above.
			if got[i] > lo[i] && (best < 0 || float64(got[i])-exact[i] >= float64(got[best])-exact[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		got[best]--
		sum--
	}
	return got
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }
