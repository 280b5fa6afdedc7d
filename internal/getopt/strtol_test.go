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
