package bw

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A steady run: one message every 1000 ns (65536 B: 62.5 MiB/s), each
// completing 5000 ns after its post.
func steady(n int, every int64) *timing {
	tm := &timing{posted: make([]int64, n), completed: make([]int64, n)}
	for i := range n {
		tm.posted[i] = 1000 + int64(i)*every
		tm.completed[i] = tm.posted[i] + 5*every
	}
	return tm
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestComputeReport(t *testing.T) {
	tm := steady(1000, 1000)
	r := computeReport(65536, 1000, tm, 1, 1, false, false)
	// Average: 1000 messages between the first post and the last
	// completion (999+5 intervals).
	wantAvg := 65536.0 * 1000 * 1e9 / (1004000.0 * 0x100000)
	if r.Size != 65536 || r.Iters != 1000 || !near(r.Avg, wantAvg) || !near(r.MsgRate, 1000*1e9/(1004000.0*1e6)) {
		t.Errorf("%+v, want average %v", r, wantAvg)
	}
	// Peak: the best stretch from a post to a later completion, 1004000/1000
	// ns per message = 1004 (integer division, as perftest's cycles).
	if want := 65536.0 * 1e9 / (1004 * 0x100000); !near(r.Peak, want) {
		t.Errorf("peak %v, want %v", r.Peak, want)
	}
	g := computeReport(65536, 1000, tm, 1, 1, false, true)
	if !near(g.Avg, r.Avg*0x100000/125000000) {
		t.Errorf("Gb/s average %v", g.Avg)
	}
	// Moderated: only every 100th completion has a timestamp; the others
	// (0) never win the minimum.
	mod := &timing{posted: tm.posted, completed: make([]int64, 1000)}
	for j := 99; j < 1000; j += 100 {
		mod.completed[j] = tm.completed[j]
	}
	m := computeReport(4096, 1000, mod, 100, 1, false, false)
	if m.Peak <= 0 || math.IsInf(m.Peak, 0) || !near(m.Avg, 4096.0*1000*1e9/(1004000.0*0x100000)) {
		t.Errorf("moderated: %+v", m)
	}
	// Without the peak: [0] holds the start and the end.
	np := computeReport(4096, 1000, &timing{posted: []int64{0}, completed: []int64{2e9}}, 100, 1, true, false)
	if np.Peak != 0 || !near(np.Avg, 4096.0*1000/2/0x100000) || !near(np.MsgRate, 500.0/1e6) {
		t.Errorf("no peak: %+v", np)
	}
}

// The result lines as perftest prints them (REPORT_FMT and, for averages
// below 0.1 Gb/s, REPORT_FMT_EXT), and ParseReports reading them back.
func TestWriteReport(t *testing.T) {
	var b bytes.Buffer
	writeHeader(&b, false, false)
	writeReport(&b, Report{Size: 65536, Iters: 2000, Peak: 32.05, Avg: 17.02, MsgRate: 0.000272}, false, lineEnd(nil))
	want := resultLine + " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 65536      2000             32.05              17.02  \t\t   0.000272\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	writeReport(&b, Report{Size: 2, Iters: 5000, Peak: 0.01, Avg: 0.002, MsgRate: 0.125}, true, lineEnd(nil))
	ext := " 2          5000           0.010000            0.002000            0.125000\n"
	if b.String() != ext {
		t.Errorf("got %q, want %q", b.String(), ext)
	}
	rs := ParseReports("junk\n" + ext + " 4096       300              0.00               37.03  \t\t   0.009479\n")
	if len(rs) != 2 || rs[0].Size != 2 || rs[0].Avg != 0.002 || rs[1] != (Report{Size: 4096, Iters: 300, Avg: 37.03, MsgRate: 0.009479}) {
		t.Errorf("ParseReports: %+v", rs)
	}
}

// TestCPUUtil: with --cpu_util (and -D) the headings gain perftest's
// CPU column and each line the share of user time in the stretch,
// computed from two readings of /proc/stat's first line; ParseReports
// reads the column back. A sample never taken prints 0.00 (perftest's
// write and read servers, --run_infinitely).
func TestCPUUtil(t *testing.T) {
	dir := t.TempDir()
	old := procStat
	t.Cleanup(func() { procStat = old })
	procStat = filepath.Join(dir, "stat")
	var c cpuSample
	for i, line := range []string{"cpu  1000 5 300 9000 7 0 0 0 0 0", "cpu  1250 5 400 9750 7 0 0 0 0 0"} {
		if err := os.WriteFile(procStat, []byte(line+"\ncpu0 1 2 3 4\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.take(i)
	}
	if u := c.util(); u != 25 { // 250 user ticks against 750 idle
		t.Errorf("util %v, want 25", u)
	}
	var b strings.Builder
	tt := &test{o: Options{cpuUtil: true}, stdout: &b, cpu: c}
	tt.writeHeader()
	tt.writeReport(Report{Size: 4096, Iters: 1000, Avg: 12.5, MsgRate: 0.003052})
	want := resultLine + resultFmt + "    CPU_Util[%]\n" + " 4096       1000             0.00               12.50  \t\t   0.003052\t    25.00\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	if rs := ParseReports(b.String()); len(rs) != 1 || rs[0].CPUUtil != 25 || rs[0].MsgRate != 0.003052 {
		t.Errorf("ParseReports: %+v", rs)
	}
	b.Reset()
	writeLatDurReport(&b, LatDurReport{Size: 2, Iters: 5000, Avg: 1.5, TPS: 330000}, lineEnd(&c))
	if rs := ParseLatDurReports(b.String()); len(rs) != 1 || rs[0].CPUUtil != 25 || rs[0].TPS != 330000 {
		t.Errorf("ParseLatDurReports(%q): %+v", b.String(), rs)
	}
	b.Reset()
	// A rate under 1000 is padded to its column's width before the tab
	// (the line of a loaded CI run of ib_send_lat and sendlat).
	writeLatDurReport(&b, LatDurReport{Size: 64, Iters: 423, Avg: 1183.15, TPS: 422.6}, lineEnd(&c))
	if rs := ParseLatDurReports(b.String()); len(rs) != 1 || rs[0].CPUUtil != 25 || rs[0].TPS != 422.6 || !strings.Contains(b.String(), "422.60 \t") {
		t.Errorf("ParseLatDurReports(%q): %+v", b.String(), rs)
	}
	if rs := ParseLatDurReports(" 64            423            1183.15        422.60 \t    100.00\n"); len(rs) != 1 || rs[0].CPUUtil != 100 {
		t.Errorf("ParseLatDurReports of ib_send_lat's line: %+v", rs)
	}
	if got := lineEnd(&cpuSample{}); got != "\t    0.00\n" {
		t.Errorf("a sample never taken ends the line with %q", got)
	}
	procStat = filepath.Join(dir, "missing")
	c.take(1)
	if c.user[1] != 0 || c.idle[1] != 0 {
		t.Errorf("an unreadable /proc/stat read as %+v", c)
	}
}

// TestOutputModes: --output prints each line's average bandwidth or
// message rate alone, as perftest's "%lf\n", and no rule or headings.
func TestOutputModes(t *testing.T) {
	r := Report{Size: 4096, Iters: 1000, Peak: 40, Avg: 12.5, MsgRate: 0.003052}
	for _, c := range []struct {
		out  Output
		want string
	}{
		{OutputBW, "12.500000\n"},
		{OutputMsgRate, "0.003052\n"},
		{OutputFull, resultLine + resultFmt + "\n 4096       1000             40.00              12.50  \t\t   0.003052\n" + resultLine},
	} {
		var b strings.Builder
		tt := &test{o: Options{Output: c.out}, stdout: &b}
		tt.writeHeader()
		tt.writeReport(r)
		tt.rule()
		if b.String() != c.want {
			t.Errorf("output %d: %q, want %q", c.out, b.String(), c.want)
		}
	}
}
