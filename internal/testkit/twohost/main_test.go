package twohost

import (
	"fmt"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; each test (from its first RequireTwoHosts, or
// RequireVM) is also checked on its own (testkit.LeakCheck: goroutines,
// fds, mappings, the kernel's RDMA objects of the host it runs on). The
// same binary plays the peer roles on host B (testkit.StartTest, the role
// in the environment): there the peer's test is checked on B, and the
// driver on A sees a leak there as the peer's failure.
func TestMain(m *testing.M) {
	sys.EnableLeakTracing()
	testkit.CheckLeaksPerTest(sys.OpenFDs, sys.OpenMappings, sys.OpenBuffers)
	code := m.Run()
	if r := sys.LeakReport(); r != "" && code == 0 {
		fmt.Fprintln(os.Stderr, r)
		code = 1
	}
	os.Exit(code)
}
