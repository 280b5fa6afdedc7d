package pingpong

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), each ping-pong prints it at its ibv_get_device_list:
// after the option checks, before the device's lookup fails ("IB device
// ... not found", or perror's line on a host without RDMA). A bad
// command line and the checks (srq's -q and -r, rc's -o -j) end before
// libibverbs is called, without it. The rest is the run without it.
func TestMemlockWarning(t *testing.T) {
	for _, c := range []struct {
		k Kind
		memlocktest.Case
	}{
		{RC, memlocktest.Case{Args: []string{"-d", "nosuchdev0"}, Warn: true}},
		{UC, memlocktest.Case{Args: []string{"-d", "nosuchdev0", "-e"}, Warn: true}},
		{UD, memlocktest.Case{Args: []string{"-d", ""}, Warn: true}},
		{SRQ, memlocktest.Case{Args: []string{"-d", "nosuchdev0", "-q", "2"}, Warn: true}},
		{RC, memlocktest.Case{Args: []string{"-x"}}},
		{RC, memlocktest.Case{Args: []string{"-o", "-j"}}},
		{SRQ, memlocktest.Case{Args: []string{"-q", "8", "-r", "4"}}},
	} {
		memlocktest.Check(t, fmt.Sprint(c.k), func(args []string, stdout, stderr *bytes.Buffer) int {
			return Main(c.k, "tool", args, stdout, stderr)
		}, c.Case)
	}
}
