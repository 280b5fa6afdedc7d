package bw

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pciDevices is where Linux lists the PCI functions (pciutils' sysfs
// access method, which perftest's scan uses).
const pciDevices = "/sys/bus/pci/devices"

// roCompliant is perftest's check_pcie_relaxed_ordering_compliant: false
// when the machine has one of the Intel root ports whose relaxed
// ordering the kernel quirks off (vendor 0x8086, device 0x6f01-0x6f0e or
// 0x2f01), true otherwise, and when the PCI functions cannot be listed
// (as pciutils then finds no device).
func roCompliant(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, e := range ents {
		vendor, ok1 := pciID(filepath.Join(dir, e.Name(), "vendor"))
		device, ok2 := pciID(filepath.Join(dir, e.Name(), "device"))
		if ok1 && ok2 && vendor == 0x8086 && (device >= 0x6f01 && device <= 0x6f0e || device == 0x2f01) {
			return false
		}
	}
	return true
}

// pciID reads a sysfs ID file ("0x8086\n").
func pciID(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 0, 16)
	return v, err == nil
}
