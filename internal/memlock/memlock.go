// Package memlock is libibverbs' RLIMIT_MEMLOCK warning as the tools
// print it. libibverbs checks the limit once per process, in ibverbs_init,
// which the first ibv_get_device_list runs before it reads the device
// list (rdma-core v44, libibverbs/device.c and init.c's
// check_memlock_limit): a non-root process whose soft limit is 32768
// bytes or less gets a two-line warning on stderr, devices or not. Each
// tool calls Warn once per run, where its C tool reaches that first
// ibv_get_device_list (directly, or through librdmacm's ucma_init); the
// text is sys.MemlockWarning's.
package memlock

import (
	"io"
	"sync"

	"github.com/pureverbs/pureverbs/internal/sys"
)

var (
	mu     sync.Mutex
	forced *string // Force's text, nil to ask the system
)

// Text is the warning a tool prints now: Force's text while one is in
// force, else sys.MemlockWarning's for this process ("" for none).
func Text() string {
	mu.Lock()
	f := forced
	mu.Unlock()
	if f != nil {
		return *f
	}
	return sys.MemlockWarning()
}

// Warn writes Text to w, if there is any. A tool calls it once per run,
// at its C tool's first ibv_get_device_list, on its stderr.
func Warn(w io.Writer) {
	if s := Text(); s != "" {
		io.WriteString(w, s)
	}
}

// Force makes Text return text (the warning, or "" for none), whatever
// the process's uid and limit, until restore is called: the tests' seam,
// since the host tests run as root or with a high limit. It is global:
// a test that forces it must not run in parallel with tools it does not
// mean to warn.
func Force(text string) (restore func()) {
	mu.Lock()
	prev := forced
	forced = &text
	mu.Unlock()
	return func() {
		mu.Lock()
		forced = prev
		mu.Unlock()
	}
}
