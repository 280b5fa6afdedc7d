package bw

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
)

// The result table's rule and headings (perftest_parameters.h).
const (
	resultLine  = "---------------------------------------------------------------------------------------\n"
	resultFmt   = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
	resultFmtG  = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
	mbsFactor   = 0x100000  // MB/sec means MiB/s
	gbsFactor   = 125000000 // Gb/sec: 10^9 bits
	nsPerSecond = 1e9       // the timestamps are nanoseconds (perftest: CPU cycles)
)

// timing holds the timestamps of one run in nanoseconds: with the peak,
// when each message was posted and when each (moderated) completion came
// back; without it only [0], the start and the end.
type timing struct {
	posted    []int64
	completed []int64
}

// computeReport is print_report_bw's arithmetic: the average over the
// whole run of iters messages (all QPs), and the peak, the best rate over
// every stretch from a post to a later completion. cqMod is the
// completion moderation; with a post list (postList > 1) only a list's
// first request has a post stamp.
func computeReport(size, iters uint64, tm *timing, cqMod, postList int, noPeak, gbits bool) Report {
	format := float64(mbsFactor)
	if gbits {
		format = gbsFactor
	}
	n := int(iters)
	// Unsigned, as perftest's cycles_t: a timestamp never taken (0, e.g.
	// completed[0] under moderation) makes a huge difference, not a
	// negative one, and never wins the minimum.
	d := func(i, j int) uint64 { return uint64(tm.completed[j]-tm.posted[i]) / uint64(j-i+1) }
	optDelta := d(0, 0)
	if !noPeak {
		m := cqMod
		for i := 0; i < n; i += max(postList, 1) {
			for j := roundUp(i+1, m) - 1; j < n; j += m {
				optDelta = min(optDelta, d(i, j))
			}
			if n%m != 0 {
				optDelta = min(optDelta, d(i, n-1))
			}
		}
	}
	last := 0
	if !noPeak {
		last = n - 1
	}
	total := float64(uint64(tm.completed[last] - tm.posted[0]))
	r := Report{Size: size, Iters: iters}
	if total > 0 {
		r.Avg = float64(size) * float64(iters) * nsPerSecond / (total * format)
		r.MsgRate = float64(iters) * nsPerSecond / (total * 1e6)
	}
	if !noPeak && optDelta > 0 {
		r.Peak = float64(size) * nsPerSecond / (float64(optDelta) * format)
	}
	return r
}

func roundUp(v, a int) int {
	if v%a == 0 {
		return v
	}
	return v + a - v%a
}

// writeHeader prints the rule and the column headings, with the CPU
// column of --cpu_util when cpu is set (RESULT_EXT_CPU_UTIL).
func writeHeader(w io.Writer, gbits, cpu bool) {
	h := resultFmt
	if gbits {
		h = resultFmtG
	}
	io.WriteString(w, resultLine+h+headingEnd(cpu))
}

// headingEnd ends a line of column headings: RESULT_EXT, or
// RESULT_EXT_CPU_UTIL with --cpu_util.
func headingEnd(cpu bool) string {
	if cpu {
		return "    CPU_Util[%]\n"
	}
	return "\n"
}

// writeReport prints a result line as print_full_bw_report does
// (REPORT_FMT, or REPORT_FMT_EXT for averages below 0.1 Gb/s), ended by
// end (see lineEnd).
func writeReport(w io.Writer, r Report, gbits bool, end string) {
	if gbits && r.Avg < 0.1 {
		fmt.Fprintf(w, " %-7d    %d           %-7.6f            %-7.6f            %-7.6f%s", r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate, end)
		return
	}
	fmt.Fprintf(w, " %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f%s", r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate, end)
}

// lineEnd ends a result line: REPORT_EXT, or with --cpu_util
// (cpu non-nil) REPORT_EXT_CPU_UTIL's column.
func lineEnd(cpu *cpuSample) string {
	if cpu == nil {
		return "\n"
	}
	return fmt.Sprintf("\t    %-3.2f\n", cpu.util())
}

// The optional last column is --cpu_util's.
var reportRE = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([0-9.]+|inf|nan|-nan)\s+([0-9.]+|inf|nan|-nan)\s+([0-9.]+|inf|nan|-nan)(?: *\t\s+([0-9.]+))?\s*$`)

// ParseReports returns the result lines of a tool's output (Go or C), in
// order.
func ParseReports(out string) []Report {
	var rs []Report
	for _, m := range reportRE.FindAllStringSubmatch(out, -1) {
		var r Report
		r.Size, _ = strconv.ParseUint(m[1], 10, 64)
		r.Iters, _ = strconv.ParseUint(m[2], 10, 64)
		r.Peak, _ = strconv.ParseFloat(m[3], 64)
		r.Avg, _ = strconv.ParseFloat(m[4], 64)
		r.MsgRate, _ = strconv.ParseFloat(m[5], 64)
		if m[6] != "" {
			r.CPUUtil, _ = strconv.ParseFloat(m[6], 64)
		}
		rs = append(rs, r)
	}
	return rs
}
