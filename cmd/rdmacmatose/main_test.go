package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open (in the VM each test is also checked on its own).
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

// TestMainBadArgs: a bad command line ends as cmatose's: getopt's
// complaint on stderr, the usage on stdout, status 1, before any device
// is touched.
func TestMainBadArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"-x"}, "ucmatose: invalid option -- 'x'\n"},
		{[]string{"-p"}, "ucmatose: option requires an argument -- 'p'\n"},
		{[]string{"-m", "-s"}, "ucmatose: option requires an argument -- 's'\n"},
	} {
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "ucmatose", c.args, &stdout, &stderr)
		if st != 1 || !strings.HasPrefix(stdout.String(), "usage: ucmatose\n\t[-s server_address]\n") ||
			!strings.HasSuffix(stdout.String(), "\t[-m(igrate)]\n\t[-a ack_timeout]\n") || stderr.String() != c.stderr {
			t.Errorf("Main(%q): %d, stdout %q, stderr %q; want 1, the usage, %q", c.args, st, stdout.String(), stderr.String(), c.stderr)
		}
	}
}

// TestMainNoDevice: on a machine without RDMA devices cmatose ends as the
// C example: create_first_event_channel's "No RDMA devices were
// detected" (librdmacm's ucma_init: ENODEV), status 1; it printed open's
// error of the rdma_cm node instead, and with rdma_ucm loaded but no
// device a server would have listened for ever.
func TestMainNoDevice(t *testing.T) {
	if !cmsync.NoDevice() {
		t.Skip("this machine has RDMA devices") // the VM has; vm_test.go runs the tool there
	}
	for _, args := range [][]string{{}, {"-s", "10.0.0.1"}} {
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "ucmatose", args, &stdout, &stderr)
		if st != 1 || stderr.String() != "No RDMA devices were detected\n" || stdout.String() != "" {
			t.Errorf("Main(%q) without devices: %d, stdout %q, stderr %q", args, st, stdout.String(), stderr.String())
		}
	}
}
