package bw

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The latency tests' table (perftest_parameters.h: RESULT_FMT_LAT,
// REPORT_FMT_LAT) and the samples left out of it.
const (
	resultFmtLat    = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
	resultFmtLatDur = " #bytes        #iterations       t_avg[usec]    tps average"
	// latMeasureTail is LAT_MEASURE_TAIL: the largest samples dropped.
	latMeasureTail = 2
)

// LatReport is one line of a latency table, in the report's units
// (microseconds, or cycles with -C).
type LatReport struct {
	Size, Iters                               uint64
	Min, Max, Typical, Avg, Stdev, P99, P99_9 float64
}

// latOptions are what the latency report prints besides the line.
type latOptions struct {
	unsorted, histogram bool // -U, -H: print the samples
	verbose             bool // not --output: the table's heading after the samples
	units               string
	// rtt is how many one-way trips a sample spans (perftest's
	// rtt_factor): 2 for write and send, whose samples are round
	// trips; 1 for read, whose sample is one read, request and response.
	rtt float64
}

// latOptions returns the report options of the run's options and verb.
func (t *test) latOptions() latOptions {
	o := &t.o
	lo := latOptions{unsorted: o.Unsorted, histogram: o.Histogram, verbose: t.verbose(), units: "usec", rtt: 2}
	if o.Cycles {
		lo.units = "cycles"
	}
	if t.v.ReadsBack() {
		lo.rtt = 1
	}
	return lo
}

// computeLat is print_report_lat's arithmetic over the post stamps of a
// run of iters messages (iters >= minIter): the samples are the times
// between consecutive posts, divided by lo.rtt (a write's or a send's
// sample is a round trip, halved; a read's is whole) and by perUnit
// stamps per microsecond (1 with -C). delta is scratch of at least iters-1 entries; w receives
// the sample lines of -U and -H (and the heading that follows them).
func computeLat(w io.Writer, size, iters uint64, posted []int64, perUnit float64, delta []uint64, lo latOptions) LatReport {
	n := int(iters) - 1
	delta = delta[:n]
	for i := range delta {
		delta[i] = uint64(posted[i+1] - posted[i])
	}
	q := perUnit * lo.rtt
	if lo.unsorted {
		fmt.Fprintf(w, "#, %s\n", lo.units)
		for i, d := range delta {
			fmt.Fprintf(w, "%d, %.6g\n", i+1, float64(d)/q)
		}
	}
	slices.Sort(delta)
	n -= latMeasureTail
	var median uint64
	if (n-1)%2 != 0 {
		median = (delta[n/2] + delta[n/2-1]) / 2
	} else {
		median = delta[n/2]
	}
	sum := 0.0
	for _, d := range delta[:n] {
		sum += float64(d) / q
	}
	avg := sum / float64(n)
	// perftest squares the difference as a C int: truncated, and on
	// x86 INT_MIN when out of range (a square above 2^31, which samples
	// in cycles reach), which can make the sum negative and the
	// deviation "-nan".
	var varSum float64
	for _, d := range delta[:n] {
		diff := cInt(avg - float64(d)/q)
		varSum += float64(cInt(math.Pow(float64(diff), 2)))
	}
	if lo.histogram {
		fmt.Fprintf(w, "#, %s\n", lo.units)
		for i, d := range delta[:n] {
			fmt.Fprintf(w, "%d, %.6g\n", i+1, float64(d)/q)
		}
	}
	if (lo.unsorted || lo.histogram) && lo.verbose {
		io.WriteString(w, resultLine+resultFmtLat)
	}
	i99 := int(math.Ceil(float64(n) * 0.99))
	i999 := int(math.Ceil(float64(n) * 0.999))
	return LatReport{Size: size, Iters: iters, Min: float64(delta[0]) / q, Max: float64(delta[n]) / q,
		Typical: float64(median) / q, Avg: avg, Stdev: cSqrt(varSum / float64(n)),
		P99: float64(delta[i99]) / q, P99_9: float64(delta[i999]) / q}
}

// cSqrt is glibc's sqrt on x86: the square root of a negative number
// is the default NaN, whose sign bit is set (printf says "-nan").
func cSqrt(f float64) float64 {
	if f < 0 {
		return math.Copysign(math.NaN(), -1)
	}
	return math.Sqrt(f)
}

// cInt is the conversion of a double to a 32-bit int as x86 does it
// (cvttsd2si): truncated, INT_MIN when out of range or NaN.
func cInt(f float64) int32 {
	if math.IsNaN(f) || f >= 1<<31 || f <= -(1<<31)-1 {
		return math.MinInt32
	}
	return int32(f)
}

// cFloat is glibc's "%-7.2f": NaN and infinities as "nan", "-nan",
// "inf", "-inf".
func cFloat(f float64) string {
	switch {
	case math.IsNaN(f) && math.Signbit(f):
		return "-nan   "
	case math.IsNaN(f):
		return "nan    "
	case math.IsInf(f, 1):
		return "inf    "
	case math.IsInf(f, -1):
		return "-inf   "
	}
	return fmt.Sprintf("%-7.2f", f)
}

// LatDurReport is one line of a latency run of fixed duration (-D).
type LatDurReport struct {
	Size, Iters uint64
	Avg, TPS    float64 // one-way microseconds (half a round trip; a whole read); turns per second
	CPUUtil     float64 // a printed line's --cpu_util column (ParseLatDurReports)
}

// computeLatDuration is print_report_lat_duration's arithmetic: iters
// messages completed in the measured stretch of ns nanoseconds, each
// sample rtt one-way trips (latOptions.rtt).
func computeLatDuration(size, iters uint64, ns int64, rtt float64) LatDurReport {
	// C's doubles: a count of 0 makes inf, as in perftest.
	us := float64(ns) / 1000
	return LatDurReport{Size: size, Iters: iters, Avg: us / rtt / float64(iters), TPS: float64(iters) / (us / 1e6)}
}

// writeLatDurReport prints a line as print_report_lat_duration does
// (REPORT_FMT_LAT_DUR).
func writeLatDurReport(w io.Writer, r LatDurReport, end string) {
	fmt.Fprintf(w, " %-7d       %d            %s        %s%s", r.Size, r.Iters, cFloat(r.Avg), cFloat(r.TPS), end)
}

// writeLatReport prints a line as print_report_lat does (REPORT_FMT_LAT).
func writeLatReport(w io.Writer, r LatReport) {
	fmt.Fprintf(w, " %-7d %d          %s        %s      %s  \t       %s     \t%s\t\t%s \t\t%s\n",
		r.Size, r.Iters, cFloat(r.Min), cFloat(r.Max), cFloat(r.Typical), cFloat(r.Avg), cFloat(r.Stdev), cFloat(r.P99), cFloat(r.P99_9))
}

// latWriteLoop is run_iter_lat_write: the two sides take turns, each
// writing a message whose last byte is its count into the peer's buffer
// and waiting until the peer's count arrives in its own; the server
// writes first. Every message completes (signaled) and is polled for
// before the next turn. Nothing is allocated per message.
type latWriteLoop struct {
	qp     sender
	cq     poller
	server bool
	iters  uint64
	wr     [1]uverbs.SendWR
	sge    [1]uverbs.SGE
	wc     [1]uverbs.WC
	local  []byte // the registered memory
	post   int    // the index in local of the last byte of the local message
	poll   int    // the index in local of the last byte of the area the peer writes
	posted []int64
	scnt   uint64
	ccnt   uint64
	gap    int64 // --latency_gap in stamp units
	y      yielder
	// -D: the clock, whose timing receives the measured stretch's ends,
	// and the completions within it (perftest's iters).
	dur     *duration
	tm      timing
	sampled uint64
}

// setup prepares a run of messages of size from local (the registered
// memory at base) to the peer's area rem, polling the area recv of the
// local memory.
func (l *latWriteLoop) setup(size uint64, local []byte, base uint64, my, recv uint64, rem uint64, rkey, lkey uint32, inline int) {
	l.sge[0] = uverbs.SGE{Addr: my, Length: uint32(size), LKey: lkey}
	l.wr[0] = uverbs.SendWR{SGL: l.sge[:], Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled, RemoteAddr: rem, RKey: rkey}
	off := my - base
	if size <= uint64(inline) {
		l.wr[0].Flags |= uverbs.SendInline
		l.wr[0].SGL = nil
		l.wr[0].Inline = local[off : off+size]
	}
	l.local = local
	l.post = int(off + size - 1)
	l.poll = int(recv - base + size - 1)
}

// run runs iters turns and stamps each post; with -D (dur) it runs
// until the time is up and counts the completions of the measured
// stretch in sampled.
func (l *latWriteLoop) run() error {
	l.scnt, l.ccnt, l.sampled = 0, 0, 0
	l.y.reset()
	timed := l.dur != nil
	if timed {
		l.dur.start(&l.tm)
		defer l.dur.halt()
	}
	end := func() bool { return timed && l.dur.phase.Load() == phaseEnd }
	var rcnt uint64
	for l.scnt < l.iters || l.ccnt < l.iters || rcnt < l.iters || (timed && !end()) {
		if (rcnt < l.iters || timed) && !(l.scnt < 1 && l.server) {
			rcnt++
			want := byte(rcnt)
			// The peer's write lands by DMA (the kernel's, for rxe): an
			// atomic load reads the memory each time round.
			for sys.LoadByte(l.local, l.poll) != want && !end() {
				if l.y.check() && l.y.peerLost() {
					return errPeerGone
				}
			}
		}
		if l.scnt < l.iters || timed {
			gapSpin(l.gap, &l.y)
			if !timed {
				l.posted[l.scnt] = stamp()
			}
			l.scnt++
			l.local[l.post] = byte(l.scnt)
			if err := l.qp.PostSend(l.wr[:]); err != nil {
				return msgError{fmt.Sprintf("Couldn't post send: scnt=%d", l.scnt), "  (" + err.Error() + ")"}
			}
		}
		if end() {
			break
		}
		if l.ccnt < l.iters || timed {
			for {
				n, err := l.cq.Poll(l.wc[:])
				if err != nil {
					return msgError{"poll CQ failed: " + err.Error()}
				}
				if n > 0 {
					break
				}
				if end() {
					// Time is up: the peer may have stopped and
					// gone, and its last write with it.
					return nil
				}
				// A peer that has gone never acknowledges the write,
				// and rxe retries it for ever at the retry count of 7
				// that perftest sets.
				if l.y.check() && l.y.peerLost() {
					return errPeerGone
				}
			}
			if wc := &l.wc[0]; wc.Status != uverbs.WCSuccess {
				return sendCompError(wc, l.scnt, l.ccnt)
			}
			l.ccnt++
			if timed && l.dur.phase.Load() == phaseSample {
				l.sampled++
			}
		}
		l.y.check()
	}
	return nil
}

// runLat is the rest of ib_write_lat: the table's heading, a run and a
// line per size (both sides measure and print), the closing rule.
// perftest ends without a closing handshake.
func (t *test) runLat() error {
	o := &t.o
	t.latHeading()
	l := &latWriteLoop{qp: t.qps[0], cq: t.sendCQ, server: !t.client, iters: o.Iters, posted: make([]int64, o.Iters), gap: gapStamps(o.LatencyGap)}
	delta := make([]uint64, o.Iters)
	l.dur, l.tm = t.latClock()
	lo := t.latOptions()
	// No exchange until the end: the peer's connection is watched
	// throughout (peerWatch).
	defer t.watchPeer(&l.y, nil)()
	for _, size := range t.sizes() {
		l.setup(size, t.mem, t.base(), t.localSlice(0), t.remoteArea(0), t.rem[0].VAddr, t.rem[0].RKey, t.mrOf(0).LKey(), o.Inline)
		if err := l.run(); err != nil {
			return withLines(err, "Test exited with Error")
		}
		t.reportLat(size, l.dur, l.sampled, &l.tm, l.posted, delta, lo)
	}
	t.rule()
	return nil
}

// latHeading prints the table's rule and heading (of a run of fixed
// duration with -D), unless --output.
func (t *test) latHeading() {
	if !t.verbose() {
		return
	}
	if t.o.Duration > 0 {
		io.WriteString(t.stdout, resultLine+resultFmtLatDur+headingEnd(t.o.cpuUtil))
	} else {
		io.WriteString(t.stdout, resultLine+resultFmtLat)
	}
}

// latClock returns the clock of a latency run of fixed duration (-D)
// and the stamps of its measured stretch; nil and none without -D.
func (t *test) latClock() (*duration, timing) {
	o := &t.o
	if o.Duration <= 0 {
		return nil, timing{}
	}
	return t.clock(), timing{posted: make([]int64, 1), completed: make([]int64, 1)}
}

// reportLat prints a size's result. A run of fixed duration (dur set)
// reports the sampled completions (or turns) of the measured stretch
// that tm's stamps bound (print_report_lat_duration); a run of
// iterations reports its post stamps (writeLat). With --output=latency
// either prints the average alone.
func (t *test) reportLat(size uint64, dur *duration, sampled uint64, tm *timing, posted []int64, delta []uint64, lo latOptions) {
	if dur == nil {
		t.writeLat(size, posted, delta, lo)
		return
	}
	toNanos(tm.posted, tm.completed)
	r := computeLatDuration(size, sampled, tm.completed[0]-tm.posted[0], lo.rtt)
	t.writeJSON(t.jsonLatDur(r))
	if t.o.Output == OutputLatency {
		fmt.Fprintf(t.stdout, "%f\n", r.Avg)
	} else {
		writeLatDurReport(t.stdout, r, lineEnd(t.cpuSample()))
	}
	t.printCounters()
}

// writeLat prints the report of a run of iterations from its post
// stamps (print_report_lat): the samples of -U and -H, then the line,
// or with --output=latency the average alone.
func (t *test) writeLat(size uint64, posted []int64, delta []uint64, lo latOptions) {
	o := &t.o
	perUnit := 1.0
	if !o.Cycles || !useTSC {
		// Microseconds (with -C and no TSC, the stamps are
		// nanoseconds, the cycles of a 1 GHz clock).
		toNanos(posted)
		if !o.Cycles {
			perUnit = 1000
		}
	}
	r := computeLat(t.stdout, size, o.Iters, posted, perUnit, delta, lo)
	t.writeJSON(t.jsonLat(r))
	if o.Output == OutputLatency {
		fmt.Fprintf(t.stdout, "%f\n", r.Avg)
	} else {
		writeLatReport(t.stdout, r)
	}
	t.printCounters()
}

var latReportRE = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+([0-9.]+|-?nan|-?inf)`, 7) + `\s*$`)

// ParseLatReports returns the result lines of a latency tool's output
// (Go or C), in order.
func ParseLatReports(out string) []LatReport {
	var rs []LatReport
	for _, m := range latReportRE.FindAllStringSubmatch(out, -1) {
		var r LatReport
		r.Size, _ = strconv.ParseUint(m[1], 10, 64)
		r.Iters, _ = strconv.ParseUint(m[2], 10, 64)
		for i, f := range []*float64{&r.Min, &r.Max, &r.Typical, &r.Avg, &r.Stdev, &r.P99, &r.P99_9} {
			*f, _ = strconv.ParseFloat(strings.TrimPrefix(m[3+i], "-"), 64)
			if strings.HasPrefix(m[3+i], "-") {
				*f = -*f
			}
		}
		rs = append(rs, r)
	}
	return rs
}

// The optional last column is --cpu_util's. A rate under 1000 is padded
// to "%-7.2lf"'s width, so a space may come before its tab.
var latDurRE = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+|-?nan|-?inf)\s+([0-9.]+|-?nan|-?inf)(?: *\t\s+([0-9.]+))?\s*$`)

// ParseLatDurReports returns the result lines of a latency tool's run of
// fixed duration (-D), in order.
func ParseLatDurReports(out string) []LatDurReport {
	var rs []LatDurReport
	for _, m := range latDurRE.FindAllStringSubmatch(out, -1) {
		var r LatDurReport
		r.Size, _ = strconv.ParseUint(m[1], 10, 64)
		r.Iters, _ = strconv.ParseUint(m[2], 10, 64)
		r.Avg, _ = strconv.ParseFloat(m[3], 64)
		r.TPS, _ = strconv.ParseFloat(m[4], 64)
		if m[5] != "" {
			r.CPUUtil, _ = strconv.ParseFloat(m[5], 64)
		}
		rs = append(rs, r)
	}
	return rs
}
