package getopt

import "testing"

func TestStrtol(t *testing.T) {
	for s, want := range map[string]int64{
		"64": 64, "0x40": 64, "0X40": 64, "0100": 64, "  64": 64, "+64": 64, "-1": -1, "64k": 64, "abc": 0, "": 0,
		"0x": 0, "08": 0, "0": 0, "99999999999999999999": 1<<63 - 1, "-99999999999999999999": -1 << 63,
	} {
		if got := Strtol(s); got != want {
			t.Errorf("Strtol(%q) = %d, want %d", s, got, want)
		}
	}
	for s, want := range map[string]uint64{
		"4096": 4096, "-1": ^uint64(0), "0x10000": 65536, "99999999999999999999": ^uint64(0), "-99999999999999999999": ^uint64(0),
	} {
		if got := Strtoul(s); got != want {
			t.Errorf("Strtoul(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestStrtolEnd: strtol's value and end pointer (glibc's, as perftest's
// CHECK_VALUE reads them: the whole argument must be the number).
func TestStrtolEnd(t *testing.T) {
	for _, c := range []struct {
		s string
		v int64
		n int
	}{
		{"", 0, 0}, {"64", 64, 2}, {"  64", 64, 4}, {"5 ", 5, 1}, {"0x", 0, 1}, {"0x1g", 1, 3}, {"0xb", 11, 3},
		{"+", 0, 0}, {" -", 0, 0}, {"abc", 0, 0}, {"08", 0, 1}, {"-0", 0, 2}, {"+3", 3, 2},
		{"99999999999999999999", 1<<63 - 1, 20}, {"-99999999999999999999", -1 << 63, 21}, {"4294967301", 4294967301, 10},
	} {
		if v, n := StrtolEnd(c.s); v != c.v || n != c.n {
			t.Errorf("StrtolEnd(%q) = %d, %d; want %d, %d", c.s, v, n, c.v, c.n)
		}
	}
}

// TestAtoi: C's atoi on a 64-bit long.
func TestAtoi(t *testing.T) {
	for in, want := range map[string]int32{
		"0": 0, "64": 64, "  +7": 7, "\t-12x": -12, "0x40": 0, "010": 10, "abc": 0, "": 0, "-": 0,
		"2147483647": 2147483647, "2147483648": -2147483648, "4294967297": 1, "99999999999": 1215752191,
		"9223372036854775807": -1, "99999999999999999999999": -1, "-99999999999999999999999": 0,
	} {
		if got := Atoi(in); got != want {
			t.Errorf("Atoi(%q) = %d, want %d", in, got, want)
		}
	}
}
