package bw

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
)

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), every perftest tool prints it at ctx_find_dev's
// ibv_get_device_list: after the parser's own warnings (--cpu_util
// without -D), before " Did not detect devices" or "IB device ... not
// found". -h, -V and a command line the parser refuses end before
// libibverbs is called, without it. The rest is the run without it.
func TestMemlockWarning(t *testing.T) {
	const cpuUtil = " CPU Utilization works only with Duration mode.\n"
	cases := []memlocktest.Case{
		{Args: []string{"-d", "nosuchdev0"}, Warn: true},
		{Args: []string{"-d", "nosuchdev0", "-R"}, Warn: true},
		{Args: []string{"-d", "nosuchdev0", "--cpu_util"}, Warn: true, Before: cpuUtil},
		{Args: []string{"-h"}},
		{Args: []string{"-V"}},
		{Args: []string{"--nosuch"}},
	}
	for _, tst := range []Test{BW, LAT} {
		for _, v := range []Verb{Write, Read, Send, Atomic} {
			memlocktest.Check(t, fmt.Sprint(tst, " ", v), func(args []string, stdout, stderr *bytes.Buffer) int {
				return MainTest(tst, v, "tool", args, stdout, stderr)
			}, cases...)
		}
	}
}
