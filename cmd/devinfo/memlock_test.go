package main

import (
	"bytes"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
)

// lowMemlock is libibverbs' warning for a non-root user with
// RLIMIT_MEMLOCK 16 KiB.
const lowMemlock = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force; the tests run as root, which is never warned),
// ibv_devinfo prints it at its first ibv_get_device_list, before anything
// else on stderr ("Failed to get IB devices list" on a host without
// RDMA, "IB device ... wasn't found"), for -l's list as for the report;
// a bad command line ends before libibverbs is called, without it. The
// rest of the run is the same as without the warning.
func TestMemlockWarning(t *testing.T) {
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-l"}, true},
		{[]string{"-d", "nosuchdev0"}, true},
		{[]string{"-v", "-d", "nosuchdev0", "-i", "1"}, true},
		{[]string{"-x"}, false},
		{[]string{"-i", "0"}, false},
	} {
		var out0, err0 bytes.Buffer
		st0 := run("ibv_devinfo", c.args, &out0, &err0)
		var out, errb bytes.Buffer
		restore := memlock.Force(lowMemlock)
		st := run("ibv_devinfo", c.args, &out, &errb)
		restore()
		want := err0.String()
		if c.warn {
			want = lowMemlock + want
		}
		if st != st0 || out.String() != out0.String() || errb.String() != want {
			t.Errorf("%q with the warning due: status %d, stdout %q, stderr %q\nwant %d, %q, %q",
				c.args, st, out.String(), errb.String(), st0, out0.String(), want)
		}
	}
}
