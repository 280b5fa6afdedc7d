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
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// Run traces every fd, mapping and buffer internal/sys creates, checks
// each VM test on its own (testkit.CheckLeaksPerTest: goroutines, fds,
// mappings, the kernel's RDMA resource counts), runs the tests, and fails
// the run when anything traced is still held at the end (its report on
// stderr). It returns the exit status for os.Exit.
func Run(m *testing.M) int {
	sys.EnableLeakTracing()
	testkit.CheckLeaksPerTest(sys.OpenFDs, sys.OpenMappings, sys.OpenBuffers)
	code := m.Run()
	if r := sys.LeakReport(); r != "" && code == 0 {
		fmt.Fprintln(os.Stderr, r)
		code = 1
	}
	return code
}
