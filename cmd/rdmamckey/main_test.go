package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open (in the VM each test is also checked on its own).
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

// TestMainBadArgs: a bad command line ends as mckey's: getopt's complaint
// on stderr, the usage on stdout, status 1; -M without -b is refused
// with mckey's line. Neither touches a device.
func TestMainBadArgs(t *testing.T) {
	for _, c := range []struct {
		args           []string
		stdout, stderr string
	}{
		{[]string{"-x"}, "usage: mckey\n\t-m multicast_address\n", "mckey: invalid option -- 'x'\n"},
		{[]string{"-m"}, "usage: mckey\n\t-m multicast_address\n", "mckey: option requires an argument -- 'm'\n"},
		{[]string{"-s", "-C", "5", "-S"}, "usage: mckey\n\t-m multicast_address\n", "mckey: option requires an argument -- 'S'\n"},
		{[]string{"-M", "ff0e::1"}, "unmapped multicast address requires binding to source address\n", ""},
	} {
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "mckey", c.args, &stdout, &stderr)
		usage := strings.HasPrefix(c.stdout, "usage")
		if st != 1 || !strings.HasPrefix(stdout.String(), c.stdout) || stderr.String() != c.stderr ||
			usage && !strings.HasSuffix(stdout.String(), "\t[-o join as a send-only full-member]\n\t[-l join without multicast loopback]\n") {
			t.Errorf("Main(%q): %d, stdout %q, stderr %q; want 1, %q, %q", c.args, st, stdout.String(), stderr.String(), c.stdout, c.stderr)
		}
	}
}
