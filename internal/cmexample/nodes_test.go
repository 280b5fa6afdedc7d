package cmexample

import (
	"bytes"
	"testing"
)

// TestNodesFit: -c counts the C examples' malloc could not allocate (a
// negative count wraps the size_t product; an absurd one fails) end the
// run with their line instead of a Go out-of-memory crash.
func TestNodesFit(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{0, true}, {1, true}, {MaxNodes, true}, {-1, false}, {MaxNodes + 1, false}, {1<<31 - 1, false}} {
		var out bytes.Buffer
		e := &Env{Name: "cmatose", Stdout: &out}
		if got := e.NodesFit(c.n); got != c.ok {
			t.Errorf("NodesFit(%d) = %v, want %v", c.n, got, c.ok)
		}
		want := ""
		if !c.ok {
			want = "cmatose: unable to allocate memory for test nodes\n"
		}
		if out.String() != want {
			t.Errorf("NodesFit(%d) printed %q, want %q", c.n, out.String(), want)
		}
	}
}
