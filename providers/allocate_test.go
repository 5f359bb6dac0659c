package providers_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/webpush-gateway/webpush-gateway/providers"
)

func TestAllocate(t *testing.T) {
	type ints = map[string]int
	type floats = map[string]float64
	tests := []struct {
		name     string
		total    int
		weights  floats
		floors   ints
		ceilings ints
		want     ints
	}{
		{"proportional split", 100, floats{"a": 3, "b": 1}, nil, nil, ints{"a": 75, "b": 25}},
		// 1.67, 3.33, 5: rounded down 1+3+5 = 9; the one slot left goes to the largest
		// remainder (a's .67), not to the largest provider.
		{"largest remainder", 10, floats{"a": 1, "b": 2, "c": 3}, nil, nil, ints{"a": 2, "b": 3, "c": 5}},
		{"largest remainder tie goes to the first id", 10, floats{"a": 1, "b": 1, "c": 1}, nil, nil, ints{"a": 4, "b": 3, "c": 3}},
		{"floor lifts a rare provider", 100, floats{"a": 99, "b": 1}, ints{"b": 10}, nil, ints{"a": 90, "b": 10}},
		{"provider without traffic gets its floor", 100, floats{"a": 5, "b": 0}, ints{"a": 8, "b": 8}, nil, ints{"a": 92, "b": 8}},
		{"ceiling caps a busy provider", 100, floats{"a": 1, "b": 1}, nil, ints{"a": 20}, ints{"a": 20, "b": 80}},
		// a is capped first (it overshoots most); with a pinned, b and c share the rest
		// evenly, which is exactly c's floor.
		{"floors and ceilings together", 100, floats{"a": 10, "b": 1, "c": 1}, ints{"c": 30}, ints{"a": 40}, ints{"a": 40, "b": 30, "c": 30}},
		{"every ceiling reached: sum below total", 100, floats{"a": 1, "b": 1}, nil, ints{"a": 10, "b": 20}, ints{"a": 10, "b": 20}},
		{"traffic at its ceiling: the rest goes to the others", 100, floats{"a": 1}, ints{"b": 1}, ints{"a": 10}, ints{"a": 10, "b": 90}},
		{"floors exactly the total", 16, floats{"a": 100}, ints{"a": 8, "b": 8}, nil, ints{"a": 8, "b": 8}},
		{"floors overshooting the total: scaled down", 10, floats{"a": 1000}, ints{"a": 8, "b": 8, "c": 4}, nil, ints{"a": 4, "b": 4, "c": 2}},
		{"floors overshooting: largest remainder", 10, nil, ints{"a": 8, "b": 8, "c": 8}, nil, ints{"a": 4, "b": 3, "c": 3}},
		// 5.2, .26, .26, .26: the small ones are lifted to 1 (sum 8 > 6); only a is above 1, so
		// a gives back the two slots.
		{"floors overshooting: at least 1 each, trimmed to total", 6, nil, ints{"a": 20, "b": 1, "c": 1, "d": 1}, nil, ints{"a": 3, "b": 1, "c": 1, "d": 1}},
		{"total below the provider count: 1 each", 2, floats{"a": 1, "b": 1, "c": 1}, nil, nil, ints{"a": 1, "b": 1, "c": 1}},
		{"zero total", 0, floats{"a": 1}, ints{"a": 4}, nil, ints{"a": 1}},
		{"zero weights everywhere: split evenly", 9, floats{"a": 0, "b": 0, "c": 0}, nil, nil, ints{"a": 3, "b": 3, "c": 3}},
		{"no weights at all: split evenly within bounds", 10, nil, ints{"a": 1, "b": 1}, ints{"b": 3}, ints{"a": 7, "b": 3}},
		{"single provider", 50, floats{"a": 1}, nil, nil, ints{"a": 50}},
		{"single provider at its ceiling", 50, floats{"a": 1}, ints{"a": 8}, ints{"a": 20}, ints{"a": 20}},
		{"bad weights count as zero", 10, floats{"a": math.NaN(), "b": -1, "c": math.Inf(1), "d": 1}, nil, nil, ints{"a": 1, "b": 1, "c": 1, "d": 7}},
		{"huge weights do not overflow", 10, floats{"a": math.MaxFloat64, "b": math.MaxFloat64}, nil, nil, ints{"a": 5, "b": 5}},
		{"floor above ceiling: the ceiling wins", 100, floats{"a": 1}, ints{"a": 50}, ints{"a": 10}, ints{"a": 10}},
		{"bad floors and ceilings are ignored", 10, floats{"a": 1, "b": 1}, ints{"a": -5}, ints{"b": 0}, ints{"a": 5, "b": 5}},
		{"provider named only by its ceiling", 20, floats{"a": 1}, nil, ints{"b": 10}, ints{"a": 19, "b": 1}},
		{"no providers", 10, nil, nil, nil, ints{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := providers.Allocate(tc.total, tc.weights, tc.floors, tc.ceilings)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Allocate(%d, %v, %v, %v) (-want +got):\n%s", tc.total, tc.weights, tc.floors, tc.ceilings, d)
			}
			checkAllocation(t, tc.total, tc.weights, tc.floors, tc.ceilings, got)
		})
	}
}

// The shipped registry's bounds with an inventory-like mix: FCM-heavy traffic, a rare
// fallback that keeps its floor.
func TestAllocateShippedBounds(t *testing.T) {
	reg, err := providers.Load("../registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	floors, ceilings := reg.InFlightBounds()
	got := providers.Allocate(768, map[string]float64{"fcm": 700, "autopush": 150, "apple": 100, "wns": 50, "fallback": 0}, floors, ceilings)
	// fcm's 537.6 is over its 512 ceiling; fallback keeps its floor 8; the other three share
	// the remaining 248 by 150:100:50 = 124, 82.7, 41.3.
	want := map[string]int{"fcm": 512, "autopush": 124, "apple": 83, "wns": 41, "fallback": 8}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Allocate (-want +got):\n%s", d)
	}
}

// checkAllocation asserts what Allocate promises for any input.
func checkAllocation(t *testing.T, total int, weights map[string]float64, floors, ceilings map[string]int, got map[string]int) {
	t.Helper()
	const limit = 1 << 20
	ids := map[string]bool{}
	for id := range weights {
		ids[id] = true
	}
	for id := range floors {
		ids[id] = true
	}
	for id := range ceilings {
		ids[id] = true
	}
	if len(got) != len(ids) {
		t.Fatalf("got %d providers %v, want one per id of the inputs (%d)", len(got), got, len(ids))
	}
	total = max(0, min(total, limit))
	sum, sumFloor, sumCeil := 0, 0, 0
	floor := map[string]int{}
	ceil := map[string]int{}
	for id := range ids {
		c := limit
		if x, ok := ceilings[id]; ok && x >= 1 {
			c = min(x, limit)
		}
		f := max(1, min(floors[id], c))
		floor[id], ceil[id] = f, c
		sumFloor += f
		sumCeil += c
		n, ok := got[id]
		if !ok {
			t.Fatalf("no share for %q in %v", id, got)
		}
		if n < 1 || n > c {
			t.Fatalf("%s got %d, want 1..%d (ceiling)", id, n, c)
		}
		sum += n
	}
	if len(ids) > 0 && sum > max(total, len(ids)) {
		t.Fatalf("sum %d > max(total %d, providers %d): %v", sum, total, len(ids), got)
	}
	if sumFloor <= total {
		if want := min(total, sumCeil); sum != want {
			t.Fatalf("floors fit: sum %d, want min(total, sum of ceilings) = %d: %v", sum, want, got)
		}
		for id := range ids {
			if got[id] < floor[id] {
				t.Fatalf("floors fit but %s got %d < floor %d: %v", id, got[id], floor[id], got)
			}
		}
		// Shares follow the weights: a provider with at least the weight of another, not at its
		// ceiling, has at most one slot less than the other has above its floor.
		w := func(id string) float64 {
			if x := weights[id]; x > 0 && !math.IsInf(x, 0) {
				return x
			}
			return 0
		}
		for i := range ids {
			for j := range ids {
				if w(i) >= w(j) && got[j] > floor[j] && got[i] < ceil[i] && got[i] < got[j]-1 {
					t.Fatalf("%s (weight %g) got %d but %s (weight %g) got %d: %v", i, w(i), got[i], j, w(j), got[j], got)
				}
			}
		}
	} else {
		if want := max(total, len(ids)); sum != want {
			t.Fatalf("floors overshoot: sum %d, want max(total, providers) = %d: %v", sum, want, got)
		}
		for id := range ids {
			if got[id] > floor[id] {
				t.Fatalf("floors overshoot but %s got %d > floor %d: %v", id, got[id], floor[id], got)
			}
		}
	}
	again := providers.Allocate(total, weights, floors, ceilings)
	if d := cmp.Diff(got, again); d != "" {
		t.Fatalf("a second call differs (-first +second):\n%s", d)
	}
}

// FuzzAllocate: for any inputs, every provider gets 1..its ceiling, the sum never exceeds
// max(total, providers), floors hold when they fit, shares follow the weights, and the result is
// deterministic (checkAllocation). data is cut into 7-byte providers: flags, weight (uint16),
// floor and ceiling (int16).
func FuzzAllocate(f *testing.F) {
	f.Add(100, []byte{7, 0, 3, 0, 1, 0, 0, 7, 0, 1, 0, 1, 0, 0})
	f.Add(10, []byte{7, 0, 0, 0, 8, 0, 0, 7, 0, 0, 0, 8, 0, 0, 7, 0, 0, 0, 4, 0, 0})
	f.Add(768, []byte{7, 2, 188, 0, 8, 2, 0, 7, 0, 150, 0, 8, 1, 0, 3, 0, 100, 0, 8, 0, 0, 5, 0, 0, 0, 0, 0, 64})
	f.Add(1, []byte{15, 255, 255, 127, 255, 128, 0, 23, 255, 254, 0, 0, 0, 0})
	f.Add(-5, []byte{0})
	f.Add(math.MaxInt, []byte{7, 255, 255, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, total int, data []byte) {
		weights := map[string]float64{}
		floors := map[string]int{}
		ceilings := map[string]int{}
		for i := 0; i+7 <= len(data) && i < 7*16; i += 7 {
			id := string(rune('a' + i/7))
			flags := data[i]
			w := float64(binary.BigEndian.Uint16(data[i+1:]))
			switch {
			case flags&8 != 0 && w == 0xFFFF:
				w = math.NaN()
			case flags&8 != 0 && w == 0xFFFE:
				w = math.Inf(1)
			case flags&16 != 0:
				w = -w
			case flags&32 != 0:
				w /= 1e6 // tiny weights
			}
			if flags&1 != 0 {
				weights[id] = w
			}
			if flags&2 != 0 {
				floors[id] = int(int16(binary.BigEndian.Uint16(data[i+3:])))
			}
			if flags&4 != 0 {
				ceilings[id] = int(int16(binary.BigEndian.Uint16(data[i+5:])))
			}
		}
		got := providers.Allocate(total, weights, floors, ceilings)
		checkAllocation(t, total, weights, floors, ceilings, got)
	})
}
