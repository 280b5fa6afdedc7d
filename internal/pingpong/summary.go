package pingpong

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// Micros is the elapsed time the C tools measure: the difference of two
// gettimeofday readings in microseconds, kept in a C float (single
// precision), which the summary arithmetic then uses.
func Micros(d time.Duration) float32 { return float32(d.Microseconds()) }

// Summary returns the two lines every ping-pong tool prints at the end,
// computed exactly as the C tools compute them:
//
//	bytes = size * iters * 2 (long long)
//	"%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1000000., bytes * 8. / usec
//	"%d iters in %.2f seconds = %.2f usec/iter\n", iters, usec / 1000000., usec / iters
//
// where usec is a float and usec / iters a float division.
func Summary(size, iters uint32, usec float32) string {
	bytes := int64(size) * int64(iters) * 2
	secs := float64(usec) / 1000000.
	return fmt.Sprintf("%d bytes in %s seconds = %s Mbit/sec\n%d iters in %s seconds = %s usec/iter\n",
		bytes, cfloat2(secs), cfloat2(float64(bytes)*8./float64(usec)),
		int32(iters), cfloat2(secs), cfloat2(float64(usec/float32(iters))))
}

// cfloat2 formats f as printf's "%.2f" does, including its spelling of
// the special values ("inf", "-nan"), which a run of zero iterations or
// zero elapsed microseconds produces.
func cfloat2(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// SummaryLines matches the two summary lines in a tool's output (either
// implementation's): bytes, seconds, Mbit/s; iterations, seconds, usec/iter.
var SummaryLines = regexp.MustCompile(`(?m)^(\d+) bytes in ([0-9.]+) seconds = ([0-9.]+|inf) Mbit/sec\r?\n(-?\d+) iters in ([0-9.]+) seconds = ([0-9.]+|inf|-?nan) usec/iter\r?$`)

// Result is a summary parsed back from output.
type Result struct {
	Bytes       int64
	Seconds     float64
	MbitPerSec  float64
	Iters       int64
	USecPerIter float64
}

// ParseSummary finds the summary lines in out. It is meant for tests and
// the performance script, which read both tools' output.
func ParseSummary(out string) (Result, error) {
	m := SummaryLines.FindStringSubmatch(out)
	if m == nil {
		return Result{}, fmt.Errorf("no summary lines in %q", out)
	}
	var r Result
	r.Bytes, _ = strconv.ParseInt(m[1], 10, 64)
	r.Seconds, _ = strconv.ParseFloat(m[2], 64)
	r.MbitPerSec, _ = strconv.ParseFloat(m[3], 64)
	r.Iters, _ = strconv.ParseInt(m[4], 10, 64)
	r.USecPerIter, _ = strconv.ParseFloat(m[6], 64)
	return r, nil
}
