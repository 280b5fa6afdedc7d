package testkit_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestGuestTools runs every command of the guest's /etc/pureverbs/tools
// (written by rxevm: the rdma-core, perftest, iproute2 and strace programs
// the suite and the demo rely on, each with a harmless option) and fails if
// one cannot start. A shared library missing from the guest makes the loader
// fail with exit status 127, as rdma did when the guest took its libraries
// from a minimal host that lacked libmnl.
func TestGuestTools(t *testing.T) {
	testkit.RequireVM(t)
	b, err := os.ReadFile("/etc/pureverbs/tools")
	if err != nil {
		t.Fatalf("%v: the guest image lists the tools the suite relies on there", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 6 {
		t.Fatalf("/etc/pureverbs/tools lists only %q", lines)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, f[0], f[1:]...)
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+testkit.GuestLibPath)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		switch {
		case err != nil && !errors.As(err, &ee):
			t.Errorf("%s: cannot start: %v", line, err)
		case err != nil && (ee.ExitCode() == 126 || ee.ExitCode() == 127):
			t.Errorf("%s: cannot start (exit status %d):\n%s", line, ee.ExitCode(), out)
		case strings.Contains(string(out), "error while loading shared libraries"):
			t.Errorf("%s: %s", line, out)
		default:
			first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
			t.Logf("%s: starts (%s)", line, first)
		}
	}
}
