package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
)

const lowMemlock = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), rdma_client prints it at rdma_getaddrinfo, whose ucma_init
// lists the devices, devices or not: for a port getaddrinfo refuses too,
// whose line goes to stdout (as for no device, ucma_init's failure). A bad
// command line ends before librdmacm is called, without it. Stdout and
// the status are the run's without the warning.
func TestMemlockWarning(t *testing.T) {
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-p", "7471x"}, true},
		{[]string{"-x"}, false},
	} {
		var out0, err0 bytes.Buffer
		st0 := Main(context.Background(), "rdma_client", c.args, &out0, &err0)
		var stdout, stderr bytes.Buffer
		restore := memlock.Force(lowMemlock)
		st := Main(context.Background(), "rdma_client", c.args, &stdout, &stderr)
		restore()
		want := err0.String()
		if c.warn {
			want = lowMemlock + want
		}
		if st != st0 || stdout.String() != out0.String() || stderr.String() != want {
			t.Errorf("Main(%q) with the warning due: %d, stdout %q, stderr %q; want %d, %q, %q",
				c.args, st, stdout.String(), stderr.String(), st0, out0.String(), want)
		}
	}
}
