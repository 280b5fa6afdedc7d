package bw

import (
	"os"
	"path/filepath"
	"testing"
)

// TestROCompliant: the Intel root ports perftest warns about make a
// machine non-compliant; other devices, unreadable IDs and a missing
// directory do not.
func TestROCompliant(t *testing.T) {
	mk := func(t *testing.T, devs map[string][2]string) string {
		dir := t.TempDir()
		for name, id := range devs {
			d := filepath.Join(dir, name)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			for i, f := range []string{"vendor", "device"} {
				if id[i] == "" {
					continue
				}
				if err := os.WriteFile(filepath.Join(d, f), []byte(id[i]+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		return dir
	}
	for _, c := range []struct {
		name string
		devs map[string][2]string
		want bool
	}{
		{"qemu", map[string][2]string{"0000:00:00.0": {"0x8086", "0x1237"}, "0000:00:01.0": {"0x8086", "0x7000"}}, true},
		{"broadwell-ep", map[string][2]string{"0000:00:00.0": {"0x8086", "0x1237"}, "0000:00:02.0": {"0x8086", "0x6f04"}}, false},
		{"first", map[string][2]string{"0000:00:02.0": {"0x8086", "0x6f01"}}, false},
		{"last", map[string][2]string{"0000:00:02.0": {"0x8086", "0x6f0e"}}, false},
		{"past", map[string][2]string{"0000:00:02.0": {"0x8086", "0x6f0f"}}, true},
		{"haswell-ep", map[string][2]string{"0000:00:02.0": {"0x8086", "0x2f01"}}, false},
		{"other vendor", map[string][2]string{"0000:00:02.0": {"0x15b3", "0x6f04"}}, true},
		{"no device file", map[string][2]string{"0000:00:02.0": {"0x8086", ""}}, true},
		{"garbage", map[string][2]string{"0000:00:02.0": {"0x8086", "six"}}, true},
	} {
		if got := roCompliant(mk(t, c.devs)); got != c.want {
			t.Errorf("%s: roCompliant %v, want %v", c.name, got, c.want)
		}
	}
	if !roCompliant(filepath.Join(t.TempDir(), "none")) {
		t.Error("no PCI directory: not compliant, want compliant (pciutils finds no device)")
	}
}
