package testkit

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

const nrHugePages = "/proc/sys/vm/nr_hugepages"

// SetHugePages reserves n huge pages (vm.nr_hugepages) for the test,
// and puts the old count back after it. The guest runs tests as root.
func SetHugePages(t testing.TB, n int) {
	t.Helper()
	old, err := os.ReadFile(nrHugePages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(nrHugePages, old, 0) })
	if err := os.WriteFile(nrHugePages, []byte(strconv.Itoa(n)), 0); err != nil {
		t.Fatalf("reserving %d huge pages: %v", n, err)
	}
}

// FreeHugePages reads /proc/meminfo's HugePages_Free.
func FreeHugePages(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "HugePages_Free:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no HugePages_Free in /proc/meminfo")
	return 0
}
