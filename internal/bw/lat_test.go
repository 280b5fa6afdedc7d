package bw

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestParseLatDefaults: the latency tests' defaults (DEF_SIZE_LAT,
// DEF_TX_LAT, DEF_ITERS; inline 0, perftest's on rxe) and their report
// options.
func TestParseLatDefaults(t *testing.T) {
	o, err := ParseTestArgs(LAT, Write, nil)
	if err != nil || o.Tst != LAT || o.Size != 2 || o.TxDepth != 1 || o.Iters != 1000 || o.Inline != 0 || o.RxDepth != 1 ||
		o.Server != "" || o.All || o.Cycles || o.Unsorted || o.Histogram || o.Output != OutputFull {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	o, err = ParseTestArgs(LAT, Write, []string{"-s", "64", "-n", "7", "-C", "-U", "-H", "-c", "UC", "-I", "32", "--output=latency", "h"})
	if err != nil || o.Size != 64 || o.Iters != 7 || !o.Cycles || !o.Unsorted || !o.Histogram || o.Conn != UC ||
		o.Inline != 32 || o.Output != OutputLatency || o.Server != "h" {
		t.Errorf("options: %+v, %v", o, err)
	}
	if o, err := ParseTestArgs(LAT, Write, []string{"-a", "h"}); err != nil || !o.All || o.Size != maxSize {
		t.Errorf("-a: %+v, %v", o, err)
	}
	if o, err := ParseTestArgs(LAT, Send, []string{"--latency_gap=25", "h"}); err != nil || o.LatencyGap != 25 {
		t.Errorf("--latency_gap=25: %+v, %v", o, err)
	}
	// -D: no iteration count, a quarter of the time as margins.
	if o, err := ParseTestArgs(LAT, Write, []string{"-D", "8", "h"}); err != nil || o.Duration != 8 || o.Iters != 0 || o.Margin != 2 {
		t.Errorf("-D 8: %+v, %v", o, err)
	}
	// The bandwidth tools keep their defaults.
	if o, err := ParseArgs(Write, nil); err != nil || o.Tst != BW || o.Size != defSize || o.TxDepth != defTxDepth || o.Iters != defItersWrite {
		t.Errorf("BW defaults: %+v, %v", o, err)
	}
}

// TestParseLatErrors: perftest's refusals that depend on the test type,
// with its texts and its exit paths (the parser's, with main's line, or
// force_dependecies', after a rule on stdout), and the options the Go
// latency tools do not implement.
func TestParseLatErrors(t *testing.T) {
	for _, c := range []struct {
		tst    Test
		v      Verb
		args   []string
		stdout string
		stderr string
	}{
		{LAT, Write, []string{"-b"}, "", " Bidirectional is only available in BW test\n Parser function exited with Error\n"},
		{LAT, Write, []string{"-N"}, "", " NoPeak only valid for BW tests\n Parser function exited with Error\n"},
		{BW, Write, []string{"-C"}, "", " Available only on Latency tests\n Parser function exited with Error\n"},
		{BW, Send, []string{"-H"}, "", " Available only on Latency tests\n Parser function exited with Error\n"},
		{BW, Read, []string{"-U"}, "", " is Available only on Latency tests\n Parser function exited with Error\n"},
		{LAT, Write, []string{"--run_infinitely"}, resultLine, " run_infinitely exists only in BW tests for now.\n"},
		{LAT, Write, []string{"--output=bandwidth"}, resultLine, " Output verbosity level for LAT can be: latency\n"},
		{BW, Write, []string{"--output=latency"}, resultLine, " Output verbosity level for BW can be: bandwidth, message_rate\n"},
		{LAT, Write, []string{"-e"}, "", " Events feature not available on WRITE verb\n Parser function exited with Error\n"},
		{LAT, Write, []string{"-n", "4"}, "", " Iteration num should be between 5 and 100000000\n Parser function exited with Error\n"},
		{LAT, Write, []string{"-q", "2"}, "", " Multiple QPs only available on bw tests\n Parser function exited with Error\n"},
		{LAT, Write, []string{"-D", "4", "-a"}, resultLine, "Duration mode currently doesn't support running on all sizes.\n"},
		{LAT, Write, []string{"-D", "4", "-f", "2"}, resultLine, "please check that DURATION > 2*MARGIN\n"},
		{LAT, Send, []string{"-D", "4", "-e"}, resultLine, "Duration mode doesn't work with events.\n"},
		{LAT, Read, []string{"-D", "4", "-e"}, resultLine, "Duration mode doesn't work with events.\n"},
		{LAT, Read, []string{"-l", "2"}, resultLine, "Post list is supported in BW tests only\n"},
		{LAT, Write, []string{"--use-srq"}, resultLine + " Using SRQ only avavilible in SEND tests.\n", ""},
		{LAT, Send, []string{"-O"}, " Dual-port mode only supports BW tests.\n", ""},
		{LAT, Read, []string{"-g"}, "", " MultiCast feature only available on SEND verb\n Parser function exited with Error\n"},
		{BW, Write, []string{"-g"}, "", " MultiCast feature only available on SEND verb\n Parser function exited with Error\n"},
		{LAT, Send, []string{"-T", "32"}, " TOS only valid for rdma_cm based QP and RawEth QP \n", ""},
		{BW, Write, []string{"-L", "10"}, " Hop limit only valid for RawEth QP \n", ""},
		{BW, Read, []string{"-L", "64", "-T", "256"}, "", " TOS should be between 0 and 255\n Parser function exited with Error\n"},
		{LAT, Read, []string{"--latency_gap=-1"}, "", " Latency gap time must be non-negative\n Parser function exited with Error\n"},
		{LAT, Send, []string{"--latency_gap", "x"}, "", " Latency gap time argument x should be int\n Parser function exited with Error\n"},
		{BW, Write, []string{"--latency_gap=5"}, resultLine, " Latency gap feature is only for latency tests\n"},
		{LAT, Send, []string{"--recv_post_list", "2"}, resultLine, "Receive post list is supported in BW tests only\n"},
		{BW, Send, []string{"--recv_post_list", "3"}, resultLine, "Number of iterations must be a multiple of receive post list size\n"},
	} {
		var out, errb bytes.Buffer
		rc := MainTest(c.tst, c.v, "prog", c.args, &out, &errb)
		if rc != 1 || out.String() != c.stdout || errb.String() != c.stderr {
			t.Errorf("%v %v %q: rc %d, stdout %q, stderr %q; want 1, %q, %q", c.tst, c.v, c.args, rc, out.String(), errb.String(), c.stdout, c.stderr)
		}
	}
}

// TestLatUsage: the latency usage offers -C, -U and -H and not the
// bandwidth options, with the latency defaults.
func TestLatUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := MainTest(LAT, Write, "writelat", []string{"-h"}, &out, &errb); rc != 1 {
		t.Errorf("-h: rc %d", rc)
	}
	u := out.String()
	for _, want := range []string{"Usage:\n  writelat            start", "  -C, --report-cycles", "  -U, --report-unsorted", "  -H, --report-histogram",
		"Size of message to exchange (default 2)", "Size of tx queue (default 1)", "(at least 5, default 1000)", "either side may be ib_write_lat."} {
		if !strings.Contains(u, want) {
			t.Errorf("usage lacks %q:\n%s", want, u)
		}
	}
	for _, no := range []string{"--bidirectional", "--noPeak", "--post_list", "--cq-mod", "--run_infinitely", "--events"} {
		if strings.Contains(u, no) {
			t.Errorf("usage offers %q:\n%s", no, u)
		}
	}
	// readlat: events and outstanding reads, RC only, no inline; sendlat:
	// events and UD.
	for _, c := range []struct {
		v       Verb
		want    []string
		without []string
	}{
		{Read, []string{"  -e, --events", "  -X, --vector", "  -o, --outs", "runs one RC QP", "either side may be ib_read_lat."}, []string{"--connection", "--inline_size", "--rx-depth"}},
		{Send, []string{"  -e, --events", "Connection type RC/UC/UD", "  -r, --rx-depth", "runs one RC, UC or UD QP", "either side may be ib_send_lat."}, []string{"--outs"}},
	} {
		out.Reset()
		MainTest(LAT, c.v, "tool", []string{"-h"}, &out, &errb)
		u := out.String()
		for _, want := range c.want {
			if !strings.Contains(u, want) {
				t.Errorf("%v usage lacks %q:\n%s", c.v, want, u)
			}
		}
		for _, no := range c.without {
			if strings.Contains(u, no) {
				t.Errorf("%v usage offers %q:\n%s", c.v, no, u)
			}
		}
	}
}

// TestComputeLat checks print_report_lat's arithmetic by hand: the
// samples are the differences of consecutive post stamps over 2 and the
// stamps per unit, sorted; the two largest are dropped; the median of
// an even count is the mean of the middle two (in integer stamps);
// perftest squares each difference from the average as a truncated int.
func TestComputeLat(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for _, c := range []struct {
		name    string
		posted  []int64
		perUnit float64
		want    LatReport
	}{
		// Deltas 10 20 6 20 100 4 cycles (-C): halves 5 10 3 10 50 2.
		// Sorted 4 6 10 20 | 20 100; the median of 4: (6+10)/2 = 8 -> 4;
		// average (2+3+5+10)/4 = 5; squared int differences 9 4 0 25:
		// sqrt(38/4); max is sample 4, the 99% and 99.9% indexes are
		// ceil(3.96) = ceil(3.996) = 4.
		{"cycles", []int64{0, 10, 30, 36, 56, 156, 160}, 1,
			LatReport{Size: 8, Iters: 7, Min: 2, Max: 10, Typical: 4, Avg: 5, Stdev: math.Sqrt(9.5), P99: 10, P99_9: 10}},
		// Nanosecond stamps in microseconds: deltas 3000 5000 7000 9000
		// 100000 200000 -> 1.5 2.5 3.5 4.5 (50 100 dropped); the
		// differences from 3 truncate to 1 0 0 -1: sqrt(2/4), not the
		// exact sqrt(1.25).
		{"usec", []int64{0, 3000, 8000, 15000, 24000, 124000, 324000}, 1000,
			LatReport{Size: 8, Iters: 7, Min: 1.5, Max: 50, Typical: 3, Avg: 3, Stdev: math.Sqrt(0.5), P99: 50, P99_9: 50}},
		// An odd count (5 of 7 samples): the middle one; index 5 for the
		// maximum and both percentiles (ceil(4.95)); halves 0.5 .. 2.5
		// from 1.5 truncate to 1 0 0 0 -1: sqrt(2/5).
		{"odd", []int64{0, 1, 3, 6, 10, 15, 21, 28}, 1,
			LatReport{Size: 8, Iters: 8, Min: 0.5, Max: 3, Typical: 1.5, Avg: 1.5, Stdev: math.Sqrt(2.0 / 5), P99: 3, P99_9: 3}},
	} {
		delta := make([]uint64, len(c.posted))
		var out bytes.Buffer
		got := computeLat(&out, 8, uint64(len(c.posted)), c.posted, c.perUnit, delta, latOptions{verbose: true, units: "usec", rtt: 2})
		if out.Len() != 0 || got.Size != c.want.Size || got.Iters != c.want.Iters || !near(got.Min, c.want.Min) || !near(got.Max, c.want.Max) ||
			!near(got.Typical, c.want.Typical) || !near(got.Avg, c.want.Avg) || !near(got.Stdev, c.want.Stdev) ||
			!near(got.P99, c.want.P99) || !near(got.P99_9, c.want.P99_9) {
			t.Errorf("%s: %+v (printed %q), want %+v", c.name, got, out.String(), c.want)
		}
	}
}

// TestComputeLatOverflow: in cycles the squared differences pass 2^31;
// perftest's int then holds INT_MIN (x86), the sum goes negative and the
// deviation prints as glibc's "-nan" (seen in the guest with -C).
func TestComputeLatOverflow(t *testing.T) {
	// Deltas 4 and 3 x 400000 kept (halves 2 and 200000; average
	// 150000.5): every square is above 2^31.
	posted := []int64{0, 4, 400004, 800004, 1200004, 1000000000 + 1200004, 2000000000 + 1200004}
	r := computeLat(io.Discard, 2, 7, posted, 1, make([]uint64, 7), latOptions{rtt: 2})
	if !math.IsNaN(r.Stdev) || !math.Signbit(r.Stdev) || r.Avg != 150000.5 {
		t.Errorf("%+v, want a stdev of -nan", r)
	}
	var out bytes.Buffer
	writeLatReport(&out, r)
	// The maximum and the percentiles are sample 4, the first dropped.
	if want := " 2       7          2.00           500000000.00      200000.00  \t       150000.50     \t-nan   \t\t500000000.00 \t\t500000000.00\n"; out.String() != want {
		t.Errorf("%q\nwant\n%q", out.String(), want)
	}
	if rs := ParseLatReports(out.String()); len(rs) != 1 || !math.IsNaN(rs[0].Stdev) || rs[0].Avg != 150000.5 {
		t.Errorf("ParseLatReports: %+v", rs)
	}
	for f, want := range map[float64]int32{1.9: 1, -1.9: -1, 2147483647: 2147483647, 2147483648: math.MinInt32, -2147483648: math.MinInt32, -3e9: math.MinInt32, math.NaN(): math.MinInt32} {
		if got := cInt(f); got != want {
			t.Errorf("cInt(%v) = %d, want %d", f, got, want)
		}
	}
}

// TestComputeLatSamples: -U prints every sample in the order measured
// before sorting, -H the sorted ones kept, each as C's %g, then the
// table's heading again (not with --output).
func TestComputeLatSamples(t *testing.T) {
	posted := []int64{0, 10, 30, 36, 56, 156, 160}
	delta := make([]uint64, len(posted))
	var out bytes.Buffer
	computeLat(&out, 8, 7, posted, 1, delta, latOptions{unsorted: true, verbose: true, units: "cycles", rtt: 2})
	if want := "#, cycles\n1, 5\n2, 10\n3, 3\n4, 10\n5, 50\n6, 2\n" + resultLine + resultFmtLat; out.String() != want {
		t.Errorf("-U:\n%q\nwant\n%q", out.String(), want)
	}
	out.Reset()
	computeLat(&out, 8, 7, posted, 1, delta, latOptions{histogram: true, units: "usec", rtt: 2})
	if want := "#, usec\n1, 2\n2, 3\n3, 5\n4, 10\n"; out.String() != want {
		t.Errorf("-H --output=latency:\n%q\nwant\n%q", out.String(), want)
	}
	// C's %g: six significant digits, exponents from 1e6.
	out.Reset()
	computeLat(&out, 8, 5, []int64{0, 3, 2469137, 2469138, 2469139}, 1, delta, latOptions{unsorted: true, units: "cycles", rtt: 2})
	if want := "#, cycles\n1, 1.5\n2, 1.23457e+06\n3, 0.5\n4, 0.5\n"; out.String() != want {
		t.Errorf("%%g:\n%q\nwant\n%q", out.String(), want)
	}
}

// TestComputeLatDuration: print_report_lat_duration's arithmetic, 5000
// turns in 2 s: 200 us each way, 2500 per second.
func TestComputeLatDuration(t *testing.T) {
	r := computeLatDuration(64, 5000, 2e9, 2)
	if r.Size != 64 || r.Iters != 5000 || r.Avg != 200 || r.TPS != 2500 {
		t.Errorf("%+v", r)
	}
	if r := computeLatDuration(64, 0, 2e9, 2); !math.IsInf(r.Avg, 1) || r.TPS != 0 {
		t.Errorf("no turns: %+v", r)
	}
}

// TestWriteLatReport: REPORT_FMT_LAT, tabs and all (a line of
// ib_write_lat 6.06 in the guest).
func TestWriteLatReport(t *testing.T) {
	var out bytes.Buffer
	writeLatReport(&out, LatReport{Size: 2, Iters: 1000, Min: 12.27, Max: 366.06, Typical: 12.79, Avg: 15.99, Stdev: 20.03, P99: 143.05, P99_9: 366.06})
	if want := " 2       1000          12.27          366.06       12.79    \t       15.99       \t20.03  \t\t143.05  \t\t366.06 \n"; out.String() != want {
		t.Errorf("%q\nwant\n%q", out.String(), want)
	}
	if rs := ParseLatReports(resultFmtLat + out.String()); len(rs) != 1 || rs[0].Size != 2 || rs[0].Iters != 1000 || rs[0].P99 != 143.05 {
		t.Errorf("ParseLatReports: %+v", rs)
	}
}

// TestLatLoopAllocs: the measured loop allocates nothing.
func TestLatLoopAllocs(t *testing.T) {
	f := &latFake{}
	mem := make([]byte, 8192)
	l := &latWriteLoop{qp: f, cq: f, iters: 50, posted: make([]int64, 50)}
	l.setup(64, mem, 0x10000, 0x10000, 0x11000, 0x90000, 7, 8, 0)
	f.mem, f.recv = mem, 0x1000+63
	mem[f.recv] = 1
	if err := l.run(); err != nil || f.posts != 50 {
		t.Fatalf("run: %v, %d posts", err, f.posts)
	}
	testkit.NoAllocs(t, 5, func() {
		f.posts, mem[f.recv] = 0, 1
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
	})
	// A failed completion ends the run with perftest's lines.
	f.fail, f.posts, mem[f.recv] = true, 0, 1
	if err := l.run(); err == nil || !strings.Contains(err.Error(), " Completion with error at client") {
		t.Errorf("failed completion: %v", err)
	}
	var m msgError
	f.posts, mem[f.recv] = 0, 1
	if err := l.run(); !errors.As(err, &m) {
		t.Errorf("%T", err)
	}
}

// latFake is the QP, the CQ and the peer of a latency loop on the
// client's side: each post is answered at once by the peer's next count
// in the polled byte, and completes.
type latFake struct {
	mem     []byte
	recv    uint64
	posts   int
	fail    bool
	posting atomic.Uint64 // posts, for a test's clock
}

func (f *latFake) PostSend(wrs []uverbs.SendWR) error {
	f.posts++
	f.posting.Add(1)
	f.mem[f.recv] = byte(f.posts + 1)
	return nil
}

func (f *latFake) Poll(wcs []uverbs.WC) (int, error) {
	wcs[0] = uverbs.WC{Status: uverbs.WCSuccess}
	if f.fail {
		wcs[0].Status = uverbs.WCStatus(5)
	}
	return 1, nil
}

// TestLatLoopDuration: with -D the loop runs until the clock ends it,
// counts the completions of the measured stretch only, and stamps its
// ends.
func TestLatLoopDuration(t *testing.T) {
	f := &latFake{}
	mem := make([]byte, 8192)
	l := &latWriteLoop{qp: f, cq: f, dur: newDuration(80*time.Millisecond, 20*time.Millisecond),
		tm: timing{posted: make([]int64, 1), completed: make([]int64, 1)}}
	l.dur.wait = afterProgress(20, &f.posting) // each phase holds posts, however slow the host
	l.setup(64, mem, 0x10000, 0x10000, 0x11000, 0x90000, 7, 8, 0)
	f.mem, f.recv = mem, 0x1000+63
	mem[f.recv] = 1
	if err := l.run(); err != nil || l.sampled == 0 || l.sampled >= uint64(f.posts) || l.tm.completed[0] <= l.tm.posted[0] {
		t.Errorf("%v: %d sampled of %d posts, stamps %v %v", err, l.sampled, f.posts, l.tm.posted, l.tm.completed)
	}
	var out bytes.Buffer
	r := computeLatDuration(64, 5000, 2e9, 2)
	writeLatDurReport(&out, r, "\n")
	if want := " 64            5000            200.00         2500.00\n"; out.String() != want {
		t.Errorf("%q, want %q", out.String(), want)
	}
	if rs := ParseLatDurReports(out.String()); len(rs) != 1 || rs[0] != r {
		t.Errorf("ParseLatDurReports(%q): %+v", out.String(), rs)
	}
}

// sendLatFake is the QP and both CQs of a send latency loop: every post
// completes, every poll finds a completion (the peer always answers).
type sendLatFake struct {
	sends, recvs, signaled int
	receiving              atomic.Uint64 // recvs, for a test's clock
}

func (f *sendLatFake) PostSend(wrs []uverbs.SendWR) error {
	f.sends++
	if wrs[0].Flags&uverbs.SendSignaled != 0 {
		f.signaled++
	}
	return nil
}

func (f *sendLatFake) PostRecv([]uverbs.RecvWR) error {
	f.recvs++
	f.receiving.Add(1)
	return nil
}

func (f *sendLatFake) Poll(wcs []uverbs.WC) (int, error) {
	wcs[0] = uverbs.WC{Status: uverbs.WCSuccess}
	return 1, nil
}

// TestLatSendLoop: ib_send_lat's turns: iters sends and receives, the
// receives posted again only while the run needs more than the rx
// depth, a completion asked for every cq_mod sends and for the last, and
// nothing allocated per message.
func TestLatSendLoop(t *testing.T) {
	f := &sendLatFake{}
	l := &latSendLoop{qp: f, rqp: f, scq: f, rcq: f, client: true, iters: 50, depth: 20, cqMod: 8, posted: make([]int64, 50)}
	mem := make([]byte, 8192)
	l.setup(64, mem, 0x10000, 0x10000, 0x11000, 5, 0, nil, 0, 0, 0)
	if err := l.prepost(); err != nil || f.recvs != 20 {
		t.Fatalf("prepost: %v, %d receives", err, f.recvs)
	}
	if err := l.run(); err != nil || f.sends != 50 || f.recvs != 50 || f.signaled != 7 || l.rcnt != 50 {
		t.Errorf("run: %v, %d sends (%d signaled), %d receives, rcnt %d", err, f.sends, f.signaled, f.recvs, l.rcnt)
	}
	testkit.NoAllocs(t, 5, func() {
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
	})
	// Inline up to the inline size.
	l.setup(64, mem, 0x10000, 0x10040, 0x11000, 5, 64, nil, 0, 0, 0)
	if l.wr[0].Flags&uverbs.SendInline == 0 || len(l.wr[0].Inline) != 64 || &l.wr[0].Inline[0] != &mem[0x40] {
		t.Errorf("inline: %+v", l.wr[0])
	}
	// UD: the peer's QP through the address handle, perftest's Q_Key,
	// and room for the GRH in each receive.
	ah := new(uverbs.AH)
	l.setup(64, mem, 0x10000, 0x10000, 0x11000, 5, 0, ah, 0x1234, udQKey, grh)
	if w := l.wr[0]; w.AH != ah || w.RemoteQPN != 0x1234 || w.RemoteQKey != udQKey || l.rsge[0].Length != 64+40 || l.rsge[0].Addr != 0x11000 {
		t.Errorf("UD: %+v, receive %+v", w, l.rsge[0])
	}
}

// evCQ is a CQ on evChannel: completions arrive when the model lets
// time pass (a wait), and an arrival queues an event only while armed.
type evCQ struct {
	n     int
	armed bool
	ch    *evChannel
}

func (c *evCQ) Poll(wcs []uverbs.WC) (int, error) {
	if c.n == 0 {
		return 0, nil
	}
	c.n--
	wcs[0] = uverbs.WC{Status: uverbs.WCSuccess}
	return 1, nil
}

func (c *evCQ) arrive() {
	c.n++
	if c.armed {
		c.armed = false
		c.ch.queue[c.ch.queued] = c
		c.ch.queued++
	}
}

// evChannel is one completion channel for both CQs of a send latency
// client, and its peer: a send brings the peer's reply first and the
// send's own completion second, both only when the loop sleeps. A wait
// with no event to take fails (the real one would sleep for ever).
type evChannel struct {
	scq, rcq      evCQ
	queue         [2]*evCQ // at most one event per CQ is queued
	queued        int
	pending       int // sends whose completion and reply have not arrived
	waits         int
	sends, recvs  int
	signaledSends int
}

func (e *evChannel) PostSend(wrs []uverbs.SendWR) error {
	e.sends++
	e.pending++
	if wrs[0].Flags&uverbs.SendSignaled != 0 {
		e.signaledSends++
	}
	return nil
}

func (e *evChannel) PostRecv([]uverbs.RecvWR) error { e.recvs++; return nil }

func (e *evChannel) wait() error {
	for ; e.pending > 0; e.pending-- {
		e.rcq.arrive()
		e.scq.arrive()
	}
	if e.queued == 0 {
		return errNoEvent
	}
	c := e.queue[0]
	e.queue[0], e.queue[1] = e.queue[1], nil
	e.queued--
	c.armed = true // ctx_notify_events: acknowledge, arm again
	e.waits++
	return nil
}

var errNoEvent = errors.New("waiting for an event that never comes")

// TestLatSendLoopEvents: with -e both CQs share one channel and events
// come in whatever order the completions arrived; every wait polls its
// own CQ first, so an event taken while waiting for the other CQ is never
// waited for again. Every turn completes, sleeping at most once per
// completion.
func TestLatSendLoopEvents(t *testing.T) {
	e := &evChannel{}
	e.scq.ch, e.rcq.ch = e, e
	e.scq.armed, e.rcq.armed = true, true // main's ibv_req_notify_cq on both
	l := &latSendLoop{qp: e, rqp: e, scq: &e.scq, rcq: &e.rcq, events: e, client: true, iters: 40, depth: 20, cqMod: 1, posted: make([]int64, 40)}
	mem := make([]byte, 8192)
	l.setup(2, mem, 0x10000, 0x10000, 0x11000, 5, 0, nil, 0, 0, 0)
	if err := l.run(); err != nil || e.sends != 40 || e.signaledSends != 40 || l.rcnt != 40 || e.waits == 0 || e.waits > 80 {
		t.Fatalf("run: %v, %d sends (%d signaled), rcnt %d, %d waits", err, e.sends, e.signaledSends, l.rcnt, e.waits)
	}
	testkit.NoAllocs(t, 5, func() {
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
	})
	// A wait that fails ends the run with perftest's line.
	e.scq.armed, e.rcq.armed, e.queued = false, false, 0
	if err := l.run(); err == nil || !strings.HasPrefix(err.Error(), " Failed to notify events to CQ\n") {
		t.Errorf("failed wait: %v", err)
	}
}

// TestLatSendLoopDuration: with -D the clock starts at the first
// receive, the loop runs until it ends, counts the receives of the
// measured stretch only, keeps the receives posted, and stamps its ends.
func TestLatSendLoopDuration(t *testing.T) {
	f := &sendLatFake{}
	l := &latSendLoop{qp: f, rqp: f, scq: f, rcq: f, client: true, depth: 8, cqMod: 1,
		dur: newDuration(80*time.Millisecond, 20*time.Millisecond), tm: timing{posted: make([]int64, 1), completed: make([]int64, 1)}}
	l.dur.wait = afterProgress(20, &f.receiving) // each phase holds receives, however slow the host
	mem := make([]byte, 8192)
	l.setup(64, mem, 0x10000, 0x10000, 0x11000, 5, 0, nil, 0, 0, 0)
	if err := l.run(); err != nil || l.sampled == 0 || l.sampled >= l.rcnt || uint64(f.recvs) != l.rcnt || l.tm.completed[0] <= l.tm.posted[0] {
		t.Errorf("%v: %d sampled of %d receives (%d posted again), stamps %v %v", err, l.sampled, l.rcnt, f.recvs, l.tm.posted, l.tm.completed)
	}
}

// silentCQ is a CQ whose peer never sends: nothing ever completes.
type silentCQ struct{ polls int }

func (c *silentCQ) Poll([]uverbs.WC) (int, error) { c.polls++; return 0, nil }

// TestLatLoopsPeerGone: the write, send and read latency loops, waiting
// for a peer that will not answer, end with errPeerGone once the peer's
// connection has said gone for the grace, and not before; a message
// that comes within the grace is taken, and the run goes on.
func TestLatLoopsPeerGone(t *testing.T) {
	defer func(g time.Duration) { peerGoneGrace = g }(peerGoneGrace)
	peerGoneGrace = 20 * time.Millisecond
	// expectGone runs a loop that waits with y for a peer whose
	// connection closes as it starts (lost: the watch's -e callback).
	expectGone := func(what string, y *yielder, lost func(), run func() error) {
		t.Helper()
		start := time.Now()
		w := &peerWatch{lost: lost}
		w.closed()
		*y = yielder{every: 1, peer: w}
		if err := bounded(t, run); err == nil || err.Error() != errPeerGone.Error() {
			t.Fatalf("%s: %v", what, err)
		}
		if el := time.Since(start); el < peerGoneGrace {
			t.Errorf("%s: gave up after %v, before the grace", what, el)
		}
	}
	mem := make([]byte, 8192)
	f := &latFake{mem: mem}
	l := &latWriteLoop{qp: f, cq: f, iters: 50, posted: make([]int64, 50)}
	l.setup(64, mem, 0x10000, 0x10000, 0x11000, 0x90000, 7, 8, 0)
	f.recv = 0x1000 + 63
	// The peer answers every post at once: the run completes even with
	// its connection gone for longer than the grace.
	lost := &peerWatch{}
	lost.gone.Store(true)
	lost.expired.Store(true)
	l.y = yielder{every: 1, peer: lost}
	mem[f.recv] = 1
	if err := l.run(); err != nil || f.posts != 50 {
		t.Fatalf("a peer that answers: %v, %d posts", err, f.posts)
	}
	// The peer's count never comes: the loop gives up after the grace.
	mem[f.recv] = 0
	f.posts = 0
	expectGone("a silent peer, gone", &l.y, nil, l.run)

	// The peer never acknowledges the write (rxe retries it for ever):
	// the wait for its completion gives up as well.
	quietCQ := &silentCQ{}
	l.cq = quietCQ
	f.posts, mem[f.recv] = 0, 1
	expectGone("an unacknowledged write, the peer gone", &l.y, nil, l.run)
	if f.posts != 1 || quietCQ.polls == 0 {
		t.Errorf("an unacknowledged write: %d posts, %d polls", f.posts, quietCQ.polls)
	}

	// send_lat: the client sends first, then waits for a receive.
	sf := &sendLatFake{}
	quiet := &silentCQ{}
	sl := &latSendLoop{qp: sf, rqp: sf, scq: sf, rcq: quiet, client: true, iters: 50, depth: 20, cqMod: 1, posted: make([]int64, 50)}
	sl.setup(64, mem, 0x10000, 0x10000, 0x11000, 5, 0, nil, 0, 0, 0)
	expectGone("send_lat, a silent peer, gone", &sl.y, nil, sl.run)
	if sf.sends != 1 || quiet.polls == 0 {
		t.Errorf("send_lat: %d sends, %d polls", sf.sends, quiet.polls)
	}

	// read_lat: the client's read is never answered.
	rf := &readLatFake{}
	readCQ := &silentCQ{}
	rl := &latReadLoop{qp: rf, cq: readCQ, iters: 50, posted: make([]int64, 50)}
	rl.setup(64, 0x10000, 0x90000, 7, 8)
	expectGone("read_lat, a silent server, gone", &rl.y, nil, rl.run)
	if rf.posts != 1 || readCQ.polls == 0 {
		t.Errorf("read_lat: %d posts, %d polls", rf.posts, readCQ.polls)
	}
	// The same with -e: the sleep on the channel ends with the grace
	// (the watch's lost cancels the wait).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rf.posts = 0
	rl.events = ctxWaiter{ctx: ctx, q: &stallingRQ{}}
	expectGone("read_lat -e, a silent server, gone", &rl.y, cancel, rl.run)

	// The bandwidth tools' sending loop: a window in flight that never
	// completes.
	bf := &fakeSQ{}
	bl := newSendLoop(bf, Write, 1000, 16, 1, false)
	bl.cq = &silentCQ{}
	bl.setup(64)
	expectGone("write_bw, a silent server, gone", &bl.y, nil, bl.run)
	if bl.scnt != 16 || bl.ccnt != 0 {
		t.Errorf("write_bw: %d posted, %d completed", bl.scnt, bl.ccnt)
	}
	// The same with -e.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	bl.events = ctxWaiter{ctx: ctx, q: &stallingRQ{}}
	expectGone("write_bw -e, a silent server, gone", &bl.y, cancel, bl.run)
}

// bounded runs a loop that should end by itself, and fails the test if
// it has not after a minute (the loop is left spinning).
func bounded(t *testing.T, run func() error) error {
	t.Helper()
	return boundedIn(t, time.Minute, run)
}

func boundedIn(t *testing.T, d time.Duration, run func() error) error {
	t.Helper()
	res := make(chan error, 1)
	go func() { res <- run() }()
	select {
	case err := <-res:
		return err
	case <-time.After(d):
		t.Fatalf("the loop still runs after %v", d)
		return nil
	}
}

// TestLatLimits: the latency tools take -w and -y and never check them,
// as perftest's *_lat.c; a run with -w 0 failed with "BW result is below
// bw limit" (no latency line sets the verdict).
func TestLatLimits(t *testing.T) {
	for _, v := range []Verb{Write, Send, Read, Atomic} {
		o, err := ParseTestArgs(LAT, v, []string{"-w", "0", "-y", "5", "host"})
		if err != nil {
			t.Fatal(err)
		}
		for _, client := range []bool{true, false} {
			tt := &test{v: v, o: o, client: client}
			if err := tt.limits(); err != nil {
				t.Errorf("%v latency, client %v, -w 0: %v", v, client, err)
			}
		}
	}
}
