package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
	"github.com/pureverbs/pureverbs/uverbs"
)

const lowMemlock = memlocktest.Low

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), rping prints it at create_first_event_channel (its
// first librdmacm call, whose ucma_init lists the devices): before "No
// RDMA devices were detected" on a machine without devices. A bad
// command line ends before, without it, and so does an address -a or -I
// cannot resolve: rping's get_addr is glibc's getaddrinfo, not
// librdmacm's.
func TestMemlockWarning(t *testing.T) {
	defer memlock.Force(lowMemlock)()
	for _, c := range []struct {
		args   []string
		status int
		stderr string
	}{
		{nil, 22, ""},
		{[]string{"-S", "100000", "-c"}, 22, "Invalid size 100000 (valid range is 23 to 65536)\n"},
		{[]string{"-a", "", "-s"}, 254, ""},
	} {
		var stdout, stderr bytes.Buffer
		if st := Main(context.Background(), c.args, &stdout, &stderr); st != c.status || stderr.String() != c.stderr {
			t.Errorf("Main(%q): %d, stderr %q; want %d, %q", c.args, st, stderr.String(), c.status, c.stderr)
		}
	}
	if devs, err := uverbs.Devices(); err == nil && len(devs) > 0 {
		return // devices here (the VM): the run follows the warning; the VM tests compare it with C
	}
	for _, args := range [][]string{{"-s"}, {"-c", "-a", "10.99.0.1", "-C", "1"}} {
		var stdout, stderr bytes.Buffer
		if st := Main(context.Background(), args, &stdout, &stderr); st != 19 || stdout.String() != "" ||
			stderr.String() != lowMemlock+"No RDMA devices were detected\n" {
			t.Errorf("Main(%q) without devices: %d, stdout %q, stderr %q", args, st, stdout.String(), stderr.String())
		}
	}
}
