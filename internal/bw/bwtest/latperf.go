package bwtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// LatPerfResult is what a latency tool's comparison logs (one JSON line,
// "LATPERF {...}"), for make perf's generator: per mode, size and
// pairing, each round's t_typical and t_avg of the client (usec; the
// client is the side that prints a line in every tool: ib_read_lat's and
// ib_atomic_lat's servers print none).
type LatPerfResult struct {
	Tool        string         `json:"tool"`
	Kernel      string         `json:"kernel"`
	Place       string         `json:"place"` // the device: "rxe0", "rxelo"
	Iters       map[string]int `json:"iters"` // size -> iterations per run
	Rounds      int            `json:"rounds"`
	Args        string         `json:"args"`
	Clocksource string         `json:"clocksource"`
	Seconds     float64        `json:"seconds"`
	// Modes are the modes run, in order: "poll", and "-e" where the tool
	// has events (every one but writelat, as perftest's).
	Modes []string `json:"modes"`
	// Typical and Avg: mode -> size -> pair -> per round.
	Typical map[string]map[string]map[string][]float64 `json:"typical"`
	Avg     map[string]map[string]map[string][]float64 `json:"avg"`
	// Skipped: mode -> pair -> why the pairing was not run.
	Skipped  map[string]map[string]string `json:"skipped,omitempty"`
	Failures []string                     `json:"failures,omitempty"` // runs that failed and were repeated
}

// LatModes are the modes LatPerf runs for tool: polling, and sleeping on
// completion events (-e) where perftest's tool has them (ib_write_lat
// has not).
func LatModes(tool Tool) []string {
	if tool.Verb == bw.Write {
		return []string{"poll"}
	}
	return []string{"poll", "-e"}
}

// latPerfSkip says why a pairing is left out of the comparison, or "".
// ib_send_lat -e hangs on kernels from 6.2 on, against itself too (9 of
// 24 C-C runs, 4 of 24 with one C side; cmd/sendlat's TestVMEvents and
// docs/performance.md): every pairing with a C side would cost a
// timeout per hang, so there only Go-Go runs.
func latPerfSkip(tool Tool, mode string, pair pptest.Pair) string {
	if tool.Verb == bw.Send && mode == "-e" && testkit.KernelAtLeast(6, 2) && pair != PerfPairs[0] {
		return "ib_send_lat -e hangs on this kernel, against itself too"
	}
	return ""
}

// latAttemptTimeout bounds one run of the comparison. The longest, 3000
// turns of 64 KiB in event mode on 6.12, take a few seconds.
const latAttemptTimeout = 2 * time.Minute

// LatPerf compares a latency tool with perftest's on one host (-bw.dev):
// every round runs, for every size (the atomic tools: 8 B only) and mode
// (LatModes), the four pairings in rotated order, each run checked as
// LatMatrixOn checks it; a run's figures are the client's t_typical and
// t_avg. It logs every round, a table of medians with Go/C, and the
// LATPERF line. -bw.args adds arguments to both sides of every run.
func LatPerf(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	host := perfHost(t)
	sizes, iters := perfSizes(t, tool)
	res := LatPerfResult{Tool: tool.Go, Kernel: testkit.KernelRelease(), Place: *perfDev, Iters: map[string]int{},
		Rounds: *perfRounds, Args: *perfArgs, Clocksource: clocksource(), Modes: LatModes(tool),
		Typical: map[string]map[string]map[string][]float64{}, Avg: map[string]map[string]map[string][]float64{}}
	for i, size := range sizes {
		res.Iters[strconv.Itoa(size)] = iters[i]
	}
	var its []string
	for i, size := range sizes {
		its = append(its, fmt.Sprintf("%d x %d B", iters[i], size))
	}
	t.Logf("%s against %s: kernel %s, %s, %d rounds, %s, modes %s, arguments %q, clocksource %s",
		tool.Go, tool.C(), res.Kernel, res.Place, res.Rounds, strings.Join(its, ", "), strings.Join(res.Modes, " "), res.Args, res.Clocksource)
	start := time.Now()
	for round := range *perfRounds {
		for _, mode := range res.Modes {
			for si, size := range sizes {
				key := strconv.Itoa(size)
				var line []string
				for k := range PerfPairs {
					pair := PerfPairs[(round+k)%len(PerfPairs)]
					if why := latPerfSkip(tool, mode, pair); why != "" {
						if res.Skipped == nil {
							res.Skipped = map[string]map[string]string{}
						}
						if res.Skipped[mode] == nil {
							res.Skipped[mode] = map[string]string{}
						}
						res.Skipped[mode][pair.String()] = why
						continue
					}
					extra := strings.Fields(*perfArgs)
					if mode != "poll" {
						extra = append(extra, mode)
					}
					r := &Run{Tool: tool, Pair: pair, Dev: *perfDev, Host: host, Size: size, Iters: iters[si], Extra: extra}
					c, failed := latPerfRun(t, r)
					for _, f := range failed {
						res.Failures = append(res.Failures, fmt.Sprintf("round %d, %s, %s, %d B: %s", round+1, mode, pair, size, f))
					}
					add(res.Typical, mode, key, pair.String(), c.Typical)
					add(res.Avg, mode, key, pair.String(), c.Avg)
					line = append(line, fmt.Sprintf("%s %.2f/%.2f", pair, c.Typical, c.Avg))
				}
				t.Logf("round %d %s size %d (typical/avg usec): %s", round+1, mode, size, strings.Join(line, ", "))
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	t.Logf("usec, median (best) over %d rounds (%s, %s, clocksource %s at the end, %v):\n%s",
		res.Rounds, res.Kernel, res.Place, clocksource(), time.Since(start).Round(time.Second), LatTable(&res, sizes))
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LATPERF %s", js)
}

// add appends v to m[mode][size][pair].
func add(m map[string]map[string]map[string][]float64, mode, size, pair string, v float64) {
	if m[mode] == nil {
		m[mode] = map[string]map[string][]float64{}
	}
	if m[mode][size] == nil {
		m[mode][size] = map[string][]float64{}
	}
	m[mode][size][pair] = append(m[mode][size][pair], v)
}

// latPerfRun runs r until it gives a figure, at most 3 times, each
// attempt bounded by latAttemptTimeout, and checks its outputs
// (CheckLat). An attempt that failed, or whose client line is not a
// number (perftest's line is all inf when it could not measure the
// CPU's MHz for it), is run again and said in the returned lines; the
// third such attempt fails the test.
func latPerfRun(t *testing.T, r *Run) (client bw.LatReport, failed []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), latAttemptTimeout)
		errs, ok := r.do(ctx, t, false)
		cancel()
		why := ""
		switch {
		case !ok:
			why = failureLine(errs[len(errs)-1].Error())
			if ctx.Err() != nil {
				why = "no end within " + latAttemptTimeout.String()
			}
		default:
			_, client = r.CheckLat(t, r.Host)
			if t.Failed() {
				t.FailNow()
			}
			if !finite(client.Typical) || !finite(client.Avg) {
				why = fmt.Sprintf("the client's line is not a number (t_typical %v, t_avg %v)", client.Typical, client.Avg)
			}
		}
		if why == "" {
			return client, failed
		}
		failed = append(failed, why)
		if attempt == 3 {
			t.Fatalf("%s %s size %d %v failed 3 times; the last: %s\nserver:\n%s\nclient:\n%s", r.Tool.Go, r.Pair, r.Size, r.Extra, why, r.Server, r.Client)
		}
		t.Logf("%s %s size %d %v: %s; running it again", r.Tool.Go, r.Pair, r.Size, r.Extra, why)
		r.Port = 0
	}
}

func finite(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) && v > 0 }

// LatTable is the markdown table of a latency comparison: per mode and
// size, the median (best) t_typical of every pairing, and Go/C of the
// typical and of the average as the median of the rounds' Go-Go/C-C.
func LatTable(r *LatPerfResult, sizes []int) string {
	var b strings.Builder
	b.WriteString("| mode | size | Go-Go | C-C | Go server, C client | C server, Go client | typical Go/C | average Go/C |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, mode := range r.Modes {
		for _, size := range sizes {
			key := strconv.Itoa(size)
			typ, avg := r.Typical[mode][key], r.Avg[mode][key]
			cell := func(p pptest.Pair) string {
				v := typ[p.String()]
				if len(v) == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2f (%.2f)", Median(v), slices.Min(v))
			}
			ratio := func(m map[string][]float64) string {
				gg, cc := m[PerfPairs[0].String()], m[PerfPairs[1].String()]
				var rs []float64
				for i := range min(len(gg), len(cc)) {
					rs = append(rs, gg[i]/cc[i])
				}
				if len(rs) == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2f", Median(rs))
			}
			fmt.Fprintf(&b, "| %s | %d B | %s | %s | %s | %s | %s | %s |\n", mode, size, cell(PerfPairs[0]), cell(PerfPairs[1]),
				cell(PerfPairs[2]), cell(PerfPairs[3]), ratio(typ), ratio(avg))
		}
	}
	return b.String()
}
