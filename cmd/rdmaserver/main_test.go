package main

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open (in the VM each test is also checked on its own).
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

// TestMainBadArgs: a bad command line ends as the C example's: getopt's
// complaint on stderr, the usage on stdout, status 1; and an address or
// port getaddrinfo refuses ends with rdma_getaddrinfo's line and code,
// before any device is touched (on a machine without
// devices, rdma_getaddrinfo's own failure: ucma_init's).
func TestMainBadArgs(t *testing.T) {
	const usage = "usage: rdma_server\n\t[-s server_address]\n\t[-p port_number]\n"
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{[]string{"-x"}, 1, usage, "rdma_server: invalid option -- 'x'\n"},
		{[]string{"-p"}, 1, usage, "rdma_server: option requires an argument -- 'p'\n"},
		{[]string{"-p", "7471x"}, 248,
			"rdma_server: start\nrdma_getaddrinfo: Servname not supported for ai_socktype\nrdma_server: end -8\n", ""},
	} {
		if c.status == 248 && cmsync.NoDevice() {
			// librdmacm's rdma_getaddrinfo starts with ucma_init, which
			// fails without a device: -1, gai_strerror's EAI_BADFLAGS.
			c.status, c.stdout = 255, "rdma_server: start\nrdma_getaddrinfo: Bad value for ai_flags\nrdma_server: end -1\n"
		}
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "rdma_server", c.args, &stdout, &stderr)
		if st != c.status || stdout.String() != c.stdout || stderr.String() != c.stderr {
			t.Errorf("Main(%q): %d, stdout %q, stderr %q; want %d, %q, %q", c.args, st, stdout.String(), stderr.String(),
				c.status, c.stdout, c.stderr)
		}
	}
}
