package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

const lowMemlock = memlocktest.Low

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), ucmatose prints it at create_first_event_channel, whose
// rdma_create_event_channel lists the devices (ucma_init): before "No RDMA
// devices were detected" on a machine without devices. A bad command
// line ends before librdmacm is called, without it.
func TestMemlockWarning(t *testing.T) {
	defer memlock.Force(lowMemlock)()
	for _, args := range [][]string{{"-x"}, {"-s", "10.0.0.1", "-x"}} {
		var stdout, stderr bytes.Buffer
		Main(context.Background(), "ucmatose", args, &stdout, &stderr)
		if stderr.String() != "ucmatose: invalid option -- 'x'\n" {
			t.Errorf("Main(%q): stderr %q, want getopt's line alone", args, stderr.String())
		}
	}
	if !cmsync.NoDevice() {
		return // devices here (the VM): the run follows the warning; the VM tests compare it with C
	}
	for _, args := range [][]string{{}, {"-s", "10.0.0.1"}} {
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "ucmatose", args, &stdout, &stderr)
		if want := lowMemlock + "No RDMA devices were detected\n"; st != 1 || stderr.String() != want || stdout.String() != "" {
			t.Errorf("Main(%q) without devices: %d, stdout %q, stderr %q; want 1, \"\", %q", args, st, stdout.String(), stderr.String(), want)
		}
	}
}
