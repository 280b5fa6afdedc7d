package pingpong

import (
	"bytes"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
)

const lowMemlock = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), each ping-pong prints it at its ibv_get_device_list:
// after the option checks, before the device's lookup fails ("IB device
// ... not found", or perror's line on a host without RDMA). A bad
// command line and the checks (srq's -q and -r, rc's -o -j) end before
// libibverbs is called, without it. The rest is the run without it.
func TestMemlockWarning(t *testing.T) {
	for _, c := range []struct {
		k    Kind
		args []string
		warn bool
	}{
		{RC, []string{"-d", "nosuchdev0"}, true},
		{UC, []string{"-d", "nosuchdev0", "-e"}, true},
		{UD, []string{"-d", ""}, true},
		{SRQ, []string{"-d", "nosuchdev0", "-q", "2"}, true},
		{RC, []string{"-x"}, false},
		{RC, []string{"-o", "-j"}, false},
		{SRQ, []string{"-q", "8", "-r", "4"}, false},
	} {
		var out0, err0 bytes.Buffer
		st0 := Main(c.k, "tool", c.args, &out0, &err0)
		var out, errb bytes.Buffer
		restore := memlock.Force(lowMemlock)
		st := Main(c.k, "tool", c.args, &out, &errb)
		restore()
		want := err0.String()
		if c.warn {
			want = lowMemlock + want
		}
		if st != st0 || out.String() != out0.String() || errb.String() != want {
			t.Errorf("%v %q with the warning due: status %d, stdout %q, stderr %q\nwant %d, %q, %q",
				c.k, c.args, st, out.String(), errb.String(), st0, out0.String(), want)
		}
	}
}
