package twohost

import (
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; each test (from its first RequireTwoHosts, or
// RequireVM) is also checked on its own (testkit.LeakCheck: goroutines,
// fds, mappings, the kernel's RDMA objects of the host it runs on). The
// same binary plays the peer roles on host B (testkit.StartTest, the role
// in the environment): there the peer's test is checked on B, and the
// driver on A sees a leak there as the peer's failure.
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}
