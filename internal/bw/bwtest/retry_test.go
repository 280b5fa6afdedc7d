package bwtest

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
)

// recTB records what clockRetry says; Fatalf ends the goroutine, as
// testing's does.
type recTB struct {
	testing.TB
	failed bool
	logs   []string
	fatal  string
}

func (r *recTB) Helper()      {}
func (r *recTB) Failed() bool { return r.failed }
func (r *recTB) Logf(format string, a ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, a...))
}
func (r *recTB) Fatalf(format string, a ...any) {
	r.fatal, r.failed = fmt.Sprintf(format, a...), true
	runtime.Goexit()
}

// retry runs clockRetry with attempts that return outs in turn (a
// failing attempt fails tb when its out is "fail") and returns the
// number of attempts made.
func retry(tb *recTB, outs ...string) int {
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		clockRetry(tb, "pair", func() string {
			out := outs[n]
			n++
			if out == "fail" {
				tb.failed = true
			}
			return out
		})
	}()
	<-done
	return n
}

// TestClockRetry: an attempt that ended on perftest's clock runs again,
// at most three times in all; success, or a failure of the attempt's
// own, ends the retries.
func TestClockRetry(t *testing.T) {
	flake := "a\n" + cClockFlake + "\n"
	for _, c := range []struct {
		name  string
		outs  []string
		n     int
		logs  int
		fatal bool
	}{
		{"passes", []string{""}, 1, 0, false},
		{"flake then passes", []string{flake, ""}, 2, 1, false},
		{"flake twice then passes", []string{flake, flake, ""}, 3, 2, false},
		{"flake three times", []string{flake, flake, flake, ""}, 3, 2, true},
		{"flake then fails", []string{flake, "fail", ""}, 2, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &recTB{TB: t}
			if n := retry(tb, c.outs...); n != c.n {
				t.Errorf("%d attempts, want %d", n, c.n)
			}
			if len(tb.logs) != c.logs {
				t.Errorf("logs %q, want %d", tb.logs, c.logs)
			}
			if got := tb.fatal != ""; got != c.fatal {
				t.Errorf("fatal %q, want one: %v", tb.fatal, c.fatal)
			}
			if c.fatal && !strings.Contains(tb.fatal, cClockFlake) {
				t.Errorf("the failure does not show the last output: %q", tb.fatal)
			}
		})
	}
	if got := clockFlake("ok", "x "+cClockFlake, "y "+cClockFlake); got != "x "+cClockFlake {
		t.Errorf("clockFlake: %q", got)
	}
	if got := clockFlake("ok", ""); got != "" {
		t.Errorf("clockFlake without the line: %q", got)
	}
}

// TestHeader: the test description is what lies between the first two
// dashed rules; output without two rules has none.
func TestHeader(t *testing.T) {
	rule := strings.Repeat("-", 87)
	out := strings.Join([]string{
		"************************************", "* Waiting for client to connect... *",
		rule, "                    RDMA_Write BW Test", " Dual-port       : OFF\t\tDevice         : rxe0", "",
		" PCIe relax order: ON", rule, " local address: LID 0000 QPN 0x0011", rule,
	}, "\n")
	want := []string{"                    RDMA_Write BW Test", " Dual-port       : OFF\t\tDevice         : rxe0", " PCIe relax order: ON"}
	if got := Header(out); !slices.Equal(got, want) {
		t.Errorf("Header: %q, want %q", got, want)
	}
	if got := Header(" IB device nosuchdev0 not found\n" + rule + "\n Dual-port : OFF\n"); got != nil {
		t.Errorf("one rule: %q, want nil", got)
	}
}

// TestStalled: a latency run of fixed duration whose report counted no
// turn, on either side, is a stall to run again; a run with turns, a run
// of fixed iterations and a bandwidth run are not.
func TestStalled(t *testing.T) {
	line := func(iters int) string {
		return latHeadingDur + "    CPU_Util[%]\n" + fmt.Sprintf(" 64       %d            %s        %s\t    12.50\n", iters,
			map[bool]string{true: "inf", false: "25.31"}[iters == 0], map[bool]string{true: "0.00", false: "19750.12"}[iters == 0])
	}
	lat := Tool{Go: "sendlat", Test: bw.LAT}
	for _, c := range []struct {
		name           string
		tool           Tool
		extra          []string
		server, client string
		want           string
	}{
		{"turns", lat, []string{"-D", "3"}, line(19750), line(19749), ""},
		{"server", lat, []string{"-D", "3", "-f", "1", "--cpu_util"}, line(0), line(19749), "server"},
		{"client", lat, []string{"-D", "3"}, line(19750), line(0), "client"},
		{"iterations", lat, nil, line(0), line(0), ""},
		{"bandwidth", Tool{Go: "sendbw", Test: bw.BW}, []string{"-D", "3"}, line(0), line(0), ""},
		{"no report", lat, []string{"-D", "3"}, "Couldn't connect", "", ""},
	} {
		r := &Run{Tool: c.tool, Extra: c.extra, Server: c.server, Client: c.client}
		if got := r.stalled(); got != c.want {
			t.Errorf("%s: stalled() = %q, want %q\nserver:\n%s", c.name, got, c.want, c.server)
		}
	}
}
