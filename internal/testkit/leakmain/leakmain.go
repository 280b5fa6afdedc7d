// Package leakmain is the TestMain of the packages whose tests run under
// the leak checks (docs/testing.md, "Leak checks"): one call instead of
// the same dozen lines in every package.
//
//	func TestMain(m *testing.M) { os.Exit(leakmain.Run(m)) }
//
// A package whose test binary also plays other roles (the fault tests'
// peer processes) dispatches those first and then calls Run. internal/sys
// cannot use it: its own tests would import it back.
package leakmain

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// Run traces every fd, mapping and buffer internal/sys creates, checks
// each VM test on its own (testkit.CheckLeaksPerTest: goroutines, fds,
// mappings and their ranges until munmapped, the kernel's RDMA resource
// counts), runs the tests, and fails
// the run when anything traced is still held at the end (its report on
// stderr). It returns the exit status for os.Exit.
func Run(m *testing.M) int {
	sys.EnableLeakTracing()
	testkit.CheckLeaksPerTest(sys.OpenFDs, sys.OpenMappings, sys.OpenRanges, sys.OpenBuffers)
	code := m.Run()
	if r := sys.LeakReport(); r != "" && code == 0 {
		fmt.Fprintln(os.Stderr, r)
		code = 1
	}
	if r := unreturnedRanges(); r != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "ring ranges whose Mapping was collected but never returned to the kernel:\n%s\n", strings.Join(r, "\n"))
		code = 1
	}
	return code
}

// unreturnedRanges collects until every Mapping the tests dropped has been
// finalized and its range returned (munmap), for at most
// testkit.LeakSettle, and lists the ranges still not returned. A test's
// objects stay reachable from its cleanup list until the test is gone, so
// the per-test check cannot ask this of them; once the tests ran, it can.
func unreturnedRanges() []string {
	deadline := time.Now().Add(testkit.LeakSettle)
	for delay := time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		runtime.GC() // the Mappings unreachable now: their finalizers queue
		r := sys.OpenRanges()
		if len(r) == 0 && sys.PendingDeadRanges() == 0 || time.Now().After(deadline) {
			return r
		}
		time.Sleep(delay) // the finalizers and the returner run meanwhile
	}
}
