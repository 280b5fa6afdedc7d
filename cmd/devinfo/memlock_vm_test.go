package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestVMMemlockWarningAsNobody runs the C tools and their Go ports as an
// unprivileged user (testkit.Nobody) with a low RLIMIT_MEMLOCK, where
// libibverbs warns at the first ibv_get_device_list: both must print the
// same stderr (the warning first, then the tool's own lines), the same
// stdout and exit with the same status. 16 and 32 KiB are warned (32768
// bytes is libibverbs' bound, inclusive), 33 KiB is not; a bad command
// line ends before libibverbs is called, without the warning.
func TestVMMemlockWarningAsNobody(t *testing.T) {
	testkit.RequireTools(t, []string{"devinfo", "rcpingpong", "writebw", "rdmaclient"},
		[]string{"ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw", "rdma_client"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const low = "libibverbs: Warning: RLIMIT_MEMLOCK is %d bytes.\n    This will severely limit memory registrations.\n"
	for _, c := range []struct {
		c, g   string
		kib    int
		args   []string
		warned bool
	}{
		{"ibv_devinfo", "devinfo", 16, []string{"-l"}, true},
		{"ibv_devinfo", "devinfo", 16, []string{"-d", testkit.RxeDev}, true},
		{"ibv_devinfo", "devinfo", 16, []string{"-d", "nosuchdev0"}, true},
		{"ibv_devinfo", "devinfo", 16, []string{"-x"}, false},
		{"ibv_devinfo", "devinfo", 32, []string{"-l"}, true},
		{"ibv_devinfo", "devinfo", 33, []string{"-l"}, false},
		{"ibv_rc_pingpong", "rcpingpong", 16, []string{"-d", "nosuchdev0"}, true},
		{"ib_write_bw", "writebw", 16, []string{"-d", "nosuchdev0"}, true},
		// rdma_getaddrinfo's ucma_init lists the devices before the port
		// is refused (the refusal's line is on stdout).
		{"rdma_client", "rdmaclient", 16, []string{"-p", "7471x"}, true},
	} {
		cOut, cErr, cSt := testkit.RunAsUser(ctx, t, testkit.Nobody, c.kib, c.c, c.args...)
		gOut, gErr, gSt := testkit.RunAsUser(ctx, t, testkit.Nobody, c.kib, c.g, c.args...)
		what := strings.Join(append([]string{c.c}, c.args...), " ")
		t.Logf("%s as nobody, ulimit -l %d: status %d, stderr %q", what, c.kib, cSt, cErr)
		warning := fmt.Sprintf(low, c.kib*1024)
		if got := strings.HasPrefix(cErr, warning); got != c.warned {
			t.Errorf("%s, ulimit -l %d: C's stderr %q; warned %v, want %v", what, c.kib, cErr, got, c.warned)
		}
		gOut = strings.ReplaceAll(gOut, c.g, c.c) // the Go tool's name in its usage and lines
		gErr = strings.ReplaceAll(gErr, c.g, c.c)
		if gErr != cErr || gSt != cSt || gOut != cOut {
			t.Errorf("%s as nobody, ulimit -l %d:\nC (status %d) stderr:\n%s\nstdout:\n%s\nGo %s (status %d) stderr:\n%s\nstdout:\n%s",
				what, c.kib, cSt, cErr, cOut, c.g, gSt, gErr, gOut)
		}
	}
}
