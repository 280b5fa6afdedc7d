package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), ibv_asyncwatch prints it at its ibv_get_device_list,
// after the options and before the device's lookup fails ("IB device ...
// not found", or perror's line on a host without RDMA); -h and a bad
// option end before libibverbs is called, without it.
func TestMemlockWarning(t *testing.T) {
	memlocktest.Check(t, "ibv_asyncwatch", func(args []string, stdout, stderr *bytes.Buffer) int {
		return run(context.Background(), args, stdout, stderr)
	},
		memlocktest.Case{Args: []string{"-d", "nosuchdev0"}, Warn: true},
		memlocktest.Case{Args: []string{"-d", ""}, Warn: true},
		memlocktest.Case{Args: []string{"-h"}},
		memlocktest.Case{Args: []string{"-x"}})
}
