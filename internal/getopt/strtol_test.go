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
