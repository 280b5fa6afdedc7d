package main

import (
	"bytes"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force; the tests run as root, which is never warned),
// ibv_devinfo prints it at its first ibv_get_device_list, before anything
// else on stderr ("Failed to get IB devices list" on a host without
// RDMA, "IB device ... wasn't found"), for -l's list as for the report;
// a bad command line ends before libibverbs is called, without it. The
// rest of the run is the same as without the warning.
func TestMemlockWarning(t *testing.T) {
	memlocktest.Check(t, "ibv_devinfo", func(args []string, stdout, stderr *bytes.Buffer) int {
		return run("ibv_devinfo", args, stdout, stderr)
	},
		memlocktest.Case{Args: []string{"-l"}, Warn: true},
		memlocktest.Case{Args: []string{"-d", "nosuchdev0"}, Warn: true},
		memlocktest.Case{Args: []string{"-v", "-d", "nosuchdev0", "-i", "1"}, Warn: true},
		memlocktest.Case{Args: []string{"-x"}},
		memlocktest.Case{Args: []string{"-i", "0"}})
}
