package bw

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
)

const lowMemlock = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), every perftest tool prints it at ctx_find_dev's
// ibv_get_device_list: after the parser's own warnings (--cpu_util
// without -D), before " Did not detect devices" or "IB device ... not
// found". -h, -V and a command line the parser refuses end before
// libibverbs is called, without it. The rest is the run without it.
func TestMemlockWarning(t *testing.T) {
	type tool struct {
		tst Test
		v   Verb
	}
	tools := []tool{{BW, Write}, {BW, Read}, {BW, Send}, {BW, Atomic}, {LAT, Write}, {LAT, Read}, {LAT, Send}, {LAT, Atomic}}
	const cpuUtil = " CPU Utilization works only with Duration mode.\n"
	for _, c := range []struct {
		args      []string
		warn      bool
		parserOut string // the parser's warnings, printed before the device is looked for
	}{
		{[]string{"-d", "nosuchdev0"}, true, ""},
		{[]string{"-d", "nosuchdev0", "-R"}, true, ""},
		{[]string{"-d", "nosuchdev0", "--cpu_util"}, true, cpuUtil},
		{[]string{"-h"}, false, ""},
		{[]string{"-V"}, false, ""},
		{[]string{"--nosuch"}, false, ""},
	} {
		for _, tl := range tools {
			var out0, err0 bytes.Buffer
			st0 := MainTest(tl.tst, tl.v, "tool", c.args, &out0, &err0)
			var out, errb bytes.Buffer
			restore := memlock.Force(lowMemlock)
			st := MainTest(tl.tst, tl.v, "tool", c.args, &out, &errb)
			restore()
			want := err0.String()
			if c.warn {
				if !strings.HasPrefix(want, c.parserOut) {
					t.Fatalf("%v %v %q: stderr %q does not start with the parser's %q", tl.tst, tl.v, c.args, want, c.parserOut)
				}
				want = c.parserOut + lowMemlock + want[len(c.parserOut):]
			}
			if st != st0 || out.String() != out0.String() || errb.String() != want {
				t.Errorf("%v %v %q with the warning due: status %d, stdout %q, stderr %q\nwant %d, %q, %q",
					tl.tst, tl.v, c.args, st, out.String(), errb.String(), st0, out0.String(), want)
			}
		}
	}
}
