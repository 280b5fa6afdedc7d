package cmsync

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

const lowMemlock = memlocktest.Low

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), CreateFirstEventChannel prints it before its own line
// ("No RDMA devices were detected" on a machine without devices), and
// SimpleMain before run (rdma_getaddrinfo's ucma_init lists the devices)
// but not for a bad command line, which getopt ends first.
func TestMemlockWarning(t *testing.T) {
	defer memlock.Force(lowMemlock)()

	var w bytes.Buffer
	ch, err := CreateFirstEventChannel(&w)
	if err == nil {
		ch.Close()
	}
	switch {
	case NoDevice():
		if want := lowMemlock + "No RDMA devices were detected\n"; w.String() != want {
			t.Errorf("CreateFirstEventChannel without devices: %q, want %q", w.String(), want)
		}
	case !strings.HasPrefix(w.String(), lowMemlock):
		t.Errorf("CreateFirstEventChannel (%v): %q, want it to start with %q", err, w.String(), lowMemlock)
	}

	run := func(ctx context.Context, server, port string, stdout, stderr io.Writer) int {
		fmt.Fprintf(stderr, "run %s %s\n", server, port)
		return 0
	}
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{nil, 0, "rdma_server: start\nrdma_server: end 0\n", lowMemlock + "run 0.0.0.0 7471\n"},
		{[]string{"-s", "10.0.0.1", "-p", "1"}, 0, "rdma_server: start\nrdma_server: end 0\n", lowMemlock + "run 10.0.0.1 1\n"},
		{[]string{"-x"}, 1, "usage: rdma_server\n\t[-s server_address]\n\t[-p port_number]\n", "rdma_server: invalid option -- 'x'\n"},
	} {
		var stdout, stderr bytes.Buffer
		st := SimpleMain(context.Background(), "rdma_server", "rdma_server", "0.0.0.0", c.args, &stdout, &stderr, run)
		if st != c.status || stdout.String() != c.stdout || stderr.String() != c.stderr {
			t.Errorf("SimpleMain(%q): %d, stdout %q, stderr %q; want %d, %q, %q",
				c.args, st, stdout.String(), stderr.String(), c.status, c.stdout, c.stderr)
		}
	}
}
