package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open (in the VM each test is also checked on its own).
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

const usage = "usage: cmtime\n\t[-s server_address]\n\t[-b bind_address]\n\t[-c connections]\n" +
	"\t[-p port_number]\n\t[-r retries]\n\t[-t timeout_ms]\n"

// TestMainBadArgs: a bad command line ends as cmtime's: getopt's
// complaint on stderr, the usage on stdout, status 1, before any device
// is touched.
func TestMainBadArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"-x"}, "cmtime: invalid option -- 'x'\n"},
		{[]string{"-s"}, "cmtime: option requires an argument -- 's'\n"},
		{[]string{"-c", "5", "-t"}, "cmtime: option requires an argument -- 't'\n"},
		{[]string{"-C", "5"}, "cmtime: invalid option -- 'C'\n"},
	} {
		var stdout, stderr bytes.Buffer
		st := Main(context.Background(), "cmtime", c.args, &stdout, &stderr)
		if st != 1 || stdout.String() != usage || stderr.String() != c.stderr {
			t.Errorf("Main(%q): %d, stdout %q, stderr %q; want 1, the usage, %q", c.args, st, stdout.String(), stderr.String(), c.stderr)
		}
	}
}

// TestMemlockWarning: libibverbs' RLIMIT_MEMLOCK warning comes at
// create_first_event_channel, before "No RDMA devices were detected";
// not for a bad command line.
func TestMemlockWarning(t *testing.T) {
	defer memlock.Force(memlocktest.Low)()
	var stdout, stderr bytes.Buffer
	Main(context.Background(), "cmtime", []string{"-x"}, &stdout, &stderr)
	if stderr.String() != "cmtime: invalid option -- 'x'\n" {
		t.Errorf("bad command line: stderr %q, want getopt's line alone", stderr.String())
	}
	if !cmsync.NoDevice() {
		return // the VM tests compare it with C there
	}
	for _, args := range [][]string{{}, {"-s", "10.0.0.1"}} {
		stdout.Reset()
		stderr.Reset()
		st := Main(context.Background(), "cmtime", args, &stdout, &stderr)
		if want := memlocktest.Low + "No RDMA devices were detected\n"; st != 1 || stderr.String() != want || stdout.String() != "" {
			t.Errorf("Main(%q) without devices: %d, stdout %q, stderr %q; want 1, \"\", %q", args, st, stdout.String(), stderr.String(), want)
		}
	}
}

// TestCFloat: glibc's %11.2f, including what cmtime's table prints when
// a step never ran or there are no connections (0/0 is x86's default
// NaN, negative: "-nan"; 1e9 is the float nearest its 999999999).
func TestCFloat(t *testing.T) {
	zero, conns := float32(0), float32(0)
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "       0.00"},
		{1.005, "       1.00"}, // binary 1.00499..., as glibc rounds it
		{2.675, "       2.67"},
		{123456.789, "  123456.79"},
		{float64(float32(999999999.)), "1000000000.00"},
		{math.Inf(1), "        inf"},
		{math.Inf(-1), "       -inf"},
		{float64(zero / conns), "       -nan"},
		{math.NaN(), "        nan"},
		{math.Copysign(0, -1), "      -0.00"},
	} {
		if got := cFloat(c.v); got != c.want {
			t.Errorf("cFloat(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestShowPerf: the table of a run with known times: the rows in
// cmtime's order, bind only with -b, max and min over the nodes that
// finished the step, and the per-connection time in float.
func TestShowPerf(t *testing.T) {
	var out bytes.Buffer
	tl := &tool{stdout: &out, connections: 3, nodes: make([]node, 3)}
	for i := range stepCnt {
		tl.times[i] = [2]timeval{{10, 0}, {10, 3000}}
		for c := range tl.nodes {
			tl.nodes[c].times[i] = [2]timeval{{10, 0}, {10, int64(100 * (c + 1))}}
		}
	}
	tl.nodes[2].times[stepConnect][1] = timeval{} // never connected: left out
	tl.showPerf()
	want := "step              total ms     max ms     min us  us / conn\n" +
		"create id    :        3.00       0.30     100.00    1000.00\n" +
		"resolve addr :        3.00       0.30     100.00    1000.00\n" +
		"resolve route:        3.00       0.30     100.00    1000.00\n" +
		"create qp    :        3.00       0.30     100.00    1000.00\n" +
		"connect      :        3.00       0.20     100.00    1000.00\n" +
		"disconnect   :        3.00       0.30     100.00    1000.00\n" +
		"destroy      :        3.00       0.30     100.00    1000.00\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	tl.src = cmsync.SetHost("10.0.0.1")
	tl.showPerf()
	if !strings.Contains(out.String(), "\nbind addr    :        3.00") {
		t.Errorf("with -b, no bind row:\n%s", out.String())
	}
}
