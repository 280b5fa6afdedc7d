package pptest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSizesIters(t *testing.T) {
	for _, c := range []struct {
		sizes, iters string
		s, n         []int
	}{
		{"64", "200", []int{64}, []int{200}},
		{"2, 16,128", "3000", []int{2, 16, 128}, []int{3000, 3000, 3000}},
		{"2,65536", "3000,200", []int{2, 65536}, []int{3000, 200}},
	} {
		s, n, err := SizesIters(c.sizes, c.iters)
		if err != nil {
			t.Errorf("SizesIters(%q, %q): %v", c.sizes, c.iters, err)
			continue
		}
		if d := cmp.Diff(c.s, s); d != "" {
			t.Errorf("SizesIters(%q, %q) sizes (-want +got):\n%s", c.sizes, c.iters, d)
		}
		if d := cmp.Diff(c.n, n); d != "" {
			t.Errorf("SizesIters(%q, %q) iterations (-want +got):\n%s", c.sizes, c.iters, d)
		}
	}
	for _, c := range [][2]string{{"", "1"}, {"64,x", "1"}, {"64", "0"}, {"0", "1"}, {"64", "-5"}, {"2,16,128", "1,2"}, {"64", "1,2"}} {
		if _, _, err := SizesIters(c[0], c[1]); err == nil {
			t.Errorf("SizesIters(%q, %q): no error", c[0], c[1])
		}
	}
}
