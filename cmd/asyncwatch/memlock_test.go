package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
)

const lowMemlock = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), ibv_asyncwatch prints it at its ibv_get_device_list,
// after the options and before the device's lookup fails ("IB device ...
// not found", or perror's line on a host without RDMA); -h and a bad
// option end before libibverbs is called, without it.
func TestMemlockWarning(t *testing.T) {
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-d", "nosuchdev0"}, true},
		{[]string{"-d", ""}, true},
		{[]string{"-h"}, false},
		{[]string{"-x"}, false},
	} {
		var out0, err0 bytes.Buffer
		st0 := run(context.Background(), c.args, &out0, &err0)
		var out, errb bytes.Buffer
		restore := memlock.Force(lowMemlock)
		st := run(context.Background(), c.args, &out, &errb)
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
