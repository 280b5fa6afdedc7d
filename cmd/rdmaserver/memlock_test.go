package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), rdma_server prints it at rdma_getaddrinfo, whose ucma_init
// lists the devices, devices or not: for a port getaddrinfo refuses too,
// whose line goes to stdout (as for no device, ucma_init's failure). A bad
// command line ends before librdmacm is called, without it. Stdout and
// the status are the run's without the warning.
func TestMemlockWarning(t *testing.T) {
	memlocktest.Check(t, "rdma_server", func(args []string, stdout, stderr *bytes.Buffer) int {
		return Main(context.Background(), "rdma_server", args, stdout, stderr)
	},
		memlocktest.Case{Args: []string{"-p", "7471x"}, Warn: true},
		memlocktest.Case{Args: []string{"-x"}})
}
