// Package testkit holds the helpers tests use inside the rdma_rxe test VM
// (see docs/testing.md and ./cmd/rxevm): detecting the VM, changing links and
// addresses, running C peers such as ibv_rc_pingpong, counting kernel RDMA
// resources and building network-namespace pairs.
//
// Every helper that needs the VM skips the test on the host (RequireVM); none
// passes silently.
package testkit

import (
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Devices and netdevs the VM sets up before any test runs.
const (
	RxeDev    = "rxe0"  // rxe on RxeNetdev; GID 0 fe80::…, GID 1 ::ffff:10.99.0.1
	RxeNetdev = "d0"    // dummy netdev, 10.99.0.1/24, MAC 02:00:00:99:00:01
	LoopDev   = "rxelo" // rxe on lo; GID 1 ::ffff:127.0.0.1, GID 2 ::1
)

// RxeAddr is the IPv4 address of RxeNetdev.
const RxeAddr = "10.99.0.1"

// SkipMessage is the reason tests needing the VM give when skipped.
const SkipMessage = "needs the rdma_rxe VM: run `make vmtest` (or KERNEL=6.12 make vmtest)"

// InVM reports whether the process runs inside the rxevm guest
// (PUREVERBS_VM=1, set by the guest's init).
func InVM() bool { return os.Getenv("PUREVERBS_VM") == "1" }

// RequireVM skips the test unless it runs inside the rxevm guest. After
// CheckLeaksPerTest, the first RequireVM of a test also starts LeakCheck.
func RequireVM(tb testing.TB) {
	tb.Helper()
	if !InVM() {
		tb.Skip(SkipMessage)
	}
	leakCheckOnce(tb)
}

var release = sync.OnceValue(func() string {
	if r := os.Getenv("PUREVERBS_KERNEL"); r != "" {
		return r
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
})

// KernelRelease returns the running kernel's release (uname -r), e.g.
// "6.1.0-57-amd64" or "6.12.107+deb12-amd64".
func KernelRelease() string { return release() }

// KernelAtLeast reports whether the running kernel is at least major.minor.
func KernelAtLeast(major, minor int) bool {
	var ma, mi int
	r := KernelRelease()
	parts := strings.SplitN(r, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma = atoi(parts[0])
	mi = atoi(parts[1])
	return ma > major || ma == major && mi >= minor
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
