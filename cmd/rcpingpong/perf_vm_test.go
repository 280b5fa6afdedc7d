package main

// The Go/C latency comparison of docs/performance.md. In the normal VM
// suite it runs one short round (a smoke test of the harness); the
// numbers in the document come from
//
//	make perf-lat
//
// (the Makefile's PERF_LAT gives the rounds, sizes and iterations).

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var (
	perfRounds = flag.Int("pp.rounds", 1, "TestVMPerformance: rounds of every pair and size")
	perfIters  = flag.String("pp.iters", "100", "TestVMPerformance: iterations per run (-n), one for all sizes or one per size (comma-separated)")
	perfSizes  = flag.String("pp.sizes", "64,4096,65536", "TestVMPerformance: message sizes (-s), comma-separated")
	perfDev    = flag.String("pp.dev", testkit.RxeDev, "TestVMPerformance: device (rxe0 or rxelo)")
	perfArgs   = flag.String("pp.args", "", "TestVMPerformance: more arguments for both sides, space-separated (e.g. -e)")
	perfEnv    = flag.String("pp.env", "", "TestVMPerformance: environment of both sides, space-separated K=V (e.g. GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1)")
)

// perfPairs are rotated: round r starts with pair r mod 4, so that no
// pairing always runs first (or last) after a size change.
var perfPairs = []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}, {Server: pptest.C, Client: pptest.C},
	{Server: pptest.Go, Client: pptest.C}, {Server: pptest.C, Client: pptest.Go}}

func clocksource() string {
	b, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return strings.TrimSpace(string(b))
}

// TestVMPerformance measures usec/iter of rcpingpong and ibv_rc_pingpong
// in the same VM: every round runs, for every size, the four pairings
// Go-Go, C-C, Go server/C client and C server/Go client (in rotated
// order), each run's figure being the mean of what its two sides print.
// It logs the per-round figures and a table of medians (and best rounds)
// with Go/C, the ratio of the Go-Go median to the C-C one, and the median
// of each round's Go-Go/C-C ratio.
func TestVMPerformance(t *testing.T) {
	testkit.RequireVM(t)
	var dev pptest.Device
	for _, d := range pptest.Devices {
		if d.Name == *perfDev {
			dev = d
		}
	}
	if dev.Name == "" {
		t.Fatalf("-pp.dev %q: not one of the VM's devices", *perfDev)
	}
	for _, kv := range strings.Fields(*perfEnv) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("-pp.env: %q is not K=V", kv)
		}
		t.Setenv(k, v)
	}
	sizes, iters, err := pptest.SizesIters(*perfSizes, *perfIters)
	if err != nil {
		t.Fatalf("-pp.sizes/-pp.iters: %v", err)
	}
	// perfdoc parses this line (its latHeadRE).
	t.Logf("kernel %s, device %s, %d rounds, sizes %s with %s iterations per run, arguments %q, environment %q, clocksource %s",
		testkit.KernelRelease(), dev.Name, *perfRounds, join(sizes), join(iters), *perfArgs, *perfEnv, clocksource())
	// results[size][pair] = usec/iter of each round
	results := map[int]map[pptest.Pair][]float64{}
	start := time.Now()
	for round := range *perfRounds {
		for i, size := range sizes {
			if results[size] == nil {
				results[size] = map[pptest.Pair][]float64{}
			}
			var line []string
			for k := range perfPairs {
				pair := perfPairs[(round+k)%len(perfPairs)]
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				r := &pptest.Run{Tool: tool, Pair: pair, Dev: dev, Size: size, Iters: iters[i], Extra: strings.Fields(*perfArgs)}
				r.Do(ctx, t)
				cancel()
				s, c := r.Check(t, 1)
				us := (s.USecPerIter + c.USecPerIter) / 2
				results[size][pair] = append(results[size][pair], us)
				line = append(line, fmt.Sprintf("%s %.2f", pair, us))
			}
			t.Logf("round %d size %d: %s", round+1, size, strings.Join(line, ", "))
		}
	}
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "| size | Go-Go | C-C | Go server, C client | C server, Go client | Go/C of the medians | median of the rounds' Go/C |\n")
	fmt.Fprintf(&tbl, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, size := range sizes {
		res := results[size]
		m := func(p pptest.Pair) float64 { return median(res[p]) }
		b := func(p pptest.Pair) float64 { return slices.Min(res[p]) }
		// Go-Go and C-C of the same round ran next to each other, under
		// about the same load of the host: their ratio is the steadier
		// figure.
		var ratios []float64
		for i := range res[perfPairs[0]] {
			ratios = append(ratios, res[perfPairs[0]][i]/res[perfPairs[1]][i])
		}
		gg, cc := m(perfPairs[0]), m(perfPairs[1])
		fmt.Fprintf(&tbl, "| %d B | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.2f | %.2f |\n", size,
			gg, b(perfPairs[0]), cc, b(perfPairs[1]), m(perfPairs[2]), b(perfPairs[2]), m(perfPairs[3]), b(perfPairs[3]),
			gg/cc, median(ratios))
	}
	t.Logf("usec/iter, median (best) over %d rounds (%s, %s, %s iterations, clocksource %s at the end, %v):\n%s",
		*perfRounds, testkit.KernelRelease(), dev.Name, join(iters), clocksource(), time.Since(start).Round(time.Second), tbl.String())
}

// join is v comma-separated, as the flags take it.
func join(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
