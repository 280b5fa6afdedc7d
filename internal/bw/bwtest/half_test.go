package bwtest

import (
	"slices"
	"testing"
)

// TestHalf: the two kernels' halves are disjoint and together the whole
// table, in its order; 6.1 takes the first case.
func TestHalf(t *testing.T) {
	for n := range 6 {
		cases := make([]int, n)
		for i := range cases {
			cases[i] = i
		}
		early, later := half(cases, false), half(cases, true)
		if len(early)+len(later) != n || len(early)-len(later) > 1 || len(later) > len(early) {
			t.Errorf("%d cases: halves of %d and %d", n, len(early), len(later))
		}
		all := slices.Sorted(slices.Values(append(slices.Clone(early), later...)))
		if !slices.Equal(all, cases) {
			t.Errorf("%d cases: the halves %v and %v do not make the table", n, early, later)
		}
		if n > 0 && early[0] != 0 {
			t.Errorf("%d cases: 6.1's half starts with %d", n, early[0])
		}
	}
}
