package pptest

import (
	"errors"
	"testing"
)

// TestNormalize: detail lines, blank lines and the random QPN and PSN go,
// lines are trimmed and sorted, every name given becomes TOOL (the longer
// first, so that "rdmaudaddy" is not read as "rdma" + "udaddy"), and the
// exit status comes last.
func TestNormalize(t *testing.T) {
	out := "  udaddy: starting client\n\n  (detail)\nlocal address: QPN 0x00001a, PSN 0xabcdef\nrdmaudaddy: connecting\r\n"
	want := "TOOL: connecting\nTOOL: starting client\nlocal address: QPN x, PSN y\n(peer TOOL: exit status 1)"
	for _, names := range [][]string{{"udaddy", "rdmaudaddy"}, {"rdmaudaddy", "udaddy"}} {
		if got := Normalize(out, errors.New("peer rdmaudaddy: exit status 1"), names...); got != want {
			t.Errorf("names %q:\n%s\nwant\n%s", names, got, want)
		}
	}
	if got := Normalize("x\n", nil); got != "x\n(exit 0)" {
		t.Errorf("exit 0: %q", got)
	}
}
