package getopt

import (
	"strings"
	"testing"
)

// TestAmbiguousByArgument: two long options of one value that differ in
// taking an argument make a prefix of both ambiguous, as glibc's
// getopt_long compares has_arg too.
func TestAmbiguousByArgument(t *testing.T) {
	longs := []Long{{Name: "size", HasArg: true, Val: 's'}, {Name: "sizes", Val: 's'}}
	_, _, err := Parse([]string{"--si", "4"}, "s:", longs)
	if err == nil || !strings.Contains(err.Error(), "is ambiguous") {
		t.Errorf("--si = %v, want ambiguous", err)
	}
}

// TestStrtolEdges: the edges of the conversions at the limits of their
// types and at the whitespace isspace takes.
func TestStrtolEdges(t *testing.T) {
	for s, want := range map[string]int64{
		"9223372036854775807": 1<<63 - 1, "9223372036854775808": 1<<63 - 1, "-9223372036854775808": -1 << 63,
		"\r5": 5, "\v\f\t\n 5": 5,
	} {
		if got := Strtol(s); got != want {
			t.Errorf("Strtol(%q) = %d, want %d", s, got, want)
		}
	}
	for s, want := range map[string]uint64{
		"18446744073709551615": ^uint64(0), "18446744073709551616": ^uint64(0), "0x10000000000000000": ^uint64(0),
	} {
		if got := Strtoul(s); got != want {
			t.Errorf("Strtoul(%q) = %d, want %d", s, got, want)
		}
	}
	// atoi is (int)strtol: past LONG_MAX it is (int)LONG_MAX, -1.
	for s, want := range map[string]int32{"18446744073709551619": -1, "18446744073709551615": -1, "2147483648": -1 << 31} {
		if got := Atoi(s); got != want {
			t.Errorf("Atoi(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestInetAtonParts: only the last part may exceed a byte, and there are
// at most four.
func TestInetAtonParts(t *testing.T) {
	for _, in := range []string{"256.1.2.3", "1.256.2.3", "1.2.3.4.0", "0.0.0.0.0"} {
		if a, ok := InetAton(in); ok {
			t.Errorf("InetAton(%q) = %v, want no address", in, a)
		}
	}
}
