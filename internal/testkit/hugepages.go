package testkit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

const nrHugePages = "/proc/sys/vm/nr_hugepages"

// The huge page pool is one per guest, and the packages of a VM run test
// in parallel: a test that sets it holds an exclusive flock on
// hugeLockPath (in this process, counted: a test may set it twice) until
// its cleanups have put the old count back.
var (
	hugeMu    sync.Mutex
	hugeFile  *os.File
	hugeUsers int
)

func hugeLockPath() string { return filepath.Join(os.TempDir(), "pureverbs-hugepages.lock") }

func lockHugePages(t testing.TB) {
	t.Helper()
	hugeMu.Lock()
	defer hugeMu.Unlock()
	if hugeUsers == 0 {
		f, err := os.OpenFile(hugeLockPath(), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			f.Close()
			t.Fatalf("locking %s: %v", hugeLockPath(), err)
		}
		hugeFile = f
	}
	hugeUsers++
	t.Cleanup(func() {
		hugeMu.Lock()
		defer hugeMu.Unlock()
		if hugeUsers--; hugeUsers == 0 {
			hugeFile.Close() // releases the flock
			hugeFile = nil
		}
	})
}

// SetHugePages reserves n huge pages (vm.nr_hugepages) for the test,
// and puts the old count back after it; other packages' tests that set
// the pool wait until then. It fails the test when the kernel reserves
// fewer (fragmented memory). The guest runs tests as root.
func SetHugePages(t testing.TB, n int) {
	t.Helper()
	lockHugePages(t)
	old, err := os.ReadFile(nrHugePages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(nrHugePages, old, 0) })
	if err := os.WriteFile(nrHugePages, []byte(strconv.Itoa(n)), 0); err != nil {
		t.Fatalf("reserving %d huge pages: %v", n, err)
	}
	b, err := os.ReadFile(nrHugePages)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.Atoi(strings.TrimSpace(string(b))); got != n {
		t.Fatalf("asked the kernel for %d huge pages, it reserved %d (memory too fragmented?)", n, got)
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
