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
// (memlock.Force), mckey prints it at create_first_event_channel, whose
// rdma_create_event_channel lists the devices (ucma_init): before "No RDMA
// devices were detected" on a machine without devices. A bad command
// line, and -M without -b, end before librdmacm is called, without it.
func TestMemlockWarning(t *testing.T) {
	defer memlock.Force(lowMemlock)()
	for _, args := range [][]string{{"-x"}, {"-m", "239.1.1.1", "-x"}} {
		var stdout, stderr bytes.Buffer
		Main(context.Background(), "mckey", args, &stdout, &stderr)
		if stderr.String() != "mckey: invalid option -- 'x'\n" {
			t.Errorf("Main(%q): stderr %q, want getopt's line alone", args, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if st := Main(context.Background(), "mckey", []string{"-M", "ff0e::1"}, &stdout, &stderr); st != 1 || stderr.Len() != 0 {
		t.Errorf("Main(-M ff0e::1): %d, stderr %q; want 1, nothing", st, stderr.String())
	}
	if !cmsync.NoDevice() {
		return // devices here (the VM): the run follows the warning; the VM tests compare it with C
	}
	for _, args := range [][]string{{"-m", "239.1.1.1"}, {"-m", "239.1.1.1", "-s"}} {
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "mckey", args, &stdout, &stderr)
		if want := lowMemlock + "No RDMA devices were detected\n"; st != 1 || stderr.String() != want || stdout.String() != "" {
			t.Errorf("Main(%q) without devices: %d, stdout %q, stderr %q; want 1, \"\", %q", args, st, stdout.String(), stderr.String(), want)
		}
	}
}
