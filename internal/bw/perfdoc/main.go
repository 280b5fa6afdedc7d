// Command perfdoc turns the logs of make perf's VM runs into
// docs/performance.md's generated sections and docs/latency.svg:
//
//	go run ./internal/bw/perfdoc -doc docs/performance.md -svg docs/latency.svg LOG...
//
// It reads, from the go test -v output the runner prints,
//   - the BWPERF lines of the bandwidth comparisons (cmd/writebw, readbw,
//     sendbw, atomicbw: TestVMBandwidth on one host, TestTwoHostBandwidth
//     across two),
//   - the LATPERF lines of the latency tools' comparisons (cmd/writelat,
//     sendlat, readlat, atomiclat: TestVMLatency),
//   - the per-round lines of cmd/rcpingpong's TestVMPerformance, polling
//     or with -e (its header line says which kernel and arguments),
//
// and replaces what lies between the "<!-- BEGIN perf:NAME -->" and
// "<!-- END perf:NAME -->" markers of the document (appending the section
// when the markers are missing); the rest of the document is kept.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
)

// The ping-pong pairings, as rcpingpong's and the bandwidth tests name them.
const (
	goGo = "go-server-go-client"
	cC   = "c-server-c-client"
	goC  = "go-server-c-client"
	cGo  = "c-server-go-client"
)

// latSeries is one latency comparison: a kernel and a mode.
type latKey struct {
	Kernel string // full release
	Events bool
}

type latData struct {
	Iters       string // "200 iterations", or per size "3000 x 2 B, 200 x 64 KiB"
	IterRange   [2]int // the fewest and the most iterations of a size
	Rounds      int
	Dev         string
	Clocksource string
	USec        map[int]map[string][]float64 // size -> pair -> per round
}

type data struct {
	bw       []*bwtest.PerfResult
	lat      map[latKey]*latData
	latTools []*bwtest.LatPerfResult
	// bwWhen, latWhen, latToolsWhen: the date and host of the logs each
	// section comes from (when, of the newest log that gave it results).
	bwWhen, latWhen, latToolsWhen string
}

var (
	bwHeadRE = regexp.MustCompile(`\S+ against \S+: kernel \S+, `)
	// rcpingpong's TestVMPerformance header; "environment" (-pp.env) since
	// 90ed278, "sizes S with" (iterations per size) since -pp.iters took a
	// list.
	latHeadRE = regexp.MustCompile(`kernel (\S+), device (\S+), (\d+) rounds, (?:sizes (\S+) with )?(\S+) iterations per run, arguments "([^"]*)"(?:, environment "([^"]*)")?, clocksource (\S+)`)
	roundRE   = regexp.MustCompile(`round \d+ size (\d+): (.*)$`)
	pairRE    = regexp.MustCompile(`([a-z-]+) ([0-9.]+)`)
)

// parse reads one log.
func parse(r io.Reader, d *data) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var cur *latData
	latRun, latHeads := false, 0
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if ok, err := jsonLine(line, "BWPERF", &d.bw); ok || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if ok, err := jsonLine(line, "LATPERF", &d.latTools); ok || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		if bwHeadRE.MatchString(line) {
			cur = nil // a bandwidth test: its round lines are in BWPERF
			continue
		}
		if strings.Contains(line, "=== RUN   TestVMPerformance") {
			latRun = true
		}
		if m := latHeadRE.FindStringSubmatch(line); m != nil {
			latHeads++
			iters, span, err := latIters(m[4], m[5])
			if err != nil {
				return fmt.Errorf("%q: %v", line, err)
			}
			if m[7] != "" {
				// An experiment (-pp.env GOMAXPROCS=1, ...), not the
				// tools as users run them: not a series of the plot.
				fmt.Fprintf(os.Stderr, "perfdoc: skipping a latency run with environment %q\n", m[7])
				cur = nil
				continue
			}
			k := latKey{Kernel: m[1], Events: slices.Contains(strings.Fields(m[6]), "-e")}
			rounds, _ := strconv.Atoi(m[3])
			cur = &latData{Iters: iters, IterRange: span, Rounds: rounds, Dev: m[2], Clocksource: m[8], USec: map[int]map[string][]float64{}}
			d.lat[k] = cur
			continue
		}
		if m := roundRE.FindStringSubmatch(line); m != nil && cur != nil {
			size, _ := strconv.Atoi(m[1])
			if cur.USec[size] == nil {
				cur.USec[size] = map[string][]float64{}
			}
			for _, p := range pairRE.FindAllStringSubmatch(m[2], -1) {
				v, err := strconv.ParseFloat(p[2], 64)
				if err == nil {
					cur.USec[size][p[1]] = append(cur.USec[size][p[1]], v)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if latRun && latHeads == 0 {
		// The header changed and the regexp no longer matches: fail
		// rather than leave the latency section silently stale.
		return errors.New("a TestVMPerformance run without a header line perfdoc understands (latHeadRE)")
	}
	return nil
}

// jsonLine appends to list the result a "TAG {...}" line carries, and
// says whether line was one.
func jsonLine[R any](line, tag string, list *[]*R) (bool, error) {
	i := strings.Index(line, tag+" {")
	if i < 0 {
		return false, nil
	}
	res := new(R)
	if err := json.Unmarshal([]byte(line[i+len(tag)+1:]), res); err != nil {
		return true, fmt.Errorf("%q: %v", line, err)
	}
	*list = append(*list, res)
	return true, nil
}

// latIters describes a latency run's iterations: "200 iterations" when
// one count was given for all sizes, else "3000 x 2 B, ..., 200 x 64 KiB";
// and the fewest and most of them.
func latIters(sizes, iters string) (string, [2]int, error) {
	if sizes == "" {
		sizes = "1" // before -pp.iters took a list: one count
	}
	s, n, err := pptest.SizesIters(sizes, iters)
	if err != nil {
		return "", [2]int{}, err
	}
	span := [2]int{slices.Min(n), slices.Max(n)}
	if span[0] == span[1] {
		return fmt.Sprintf("%d iterations", n[0]), span, nil
	}
	var its []string
	for i := range s {
		its = append(its, fmt.Sprintf("%d x %s", n[i], sizeStr(s[i])))
	}
	return strings.Join(its, ", "), span, nil
}

// short is the kernel's series: "6.1" or "6.12".
func short(release string) string {
	f := strings.SplitN(release, ".", 3)
	if len(f) < 2 {
		return release
	}
	return f[0] + "." + f[1]
}

func kernelOrder(a, b string) int {
	pa, pb := strings.Split(short(a), "."), strings.Split(short(b), ".")
	for i := range min(len(pa), len(pb)) {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return strings.Compare(a, b)
}

var toolOrder = map[string]int{"writebw": 0, "readbw": 1, "sendbw": 2, "atomicbw": 3,
	"writelat": 0, "sendlat": 1, "readlat": 2, "atomiclat": 3}

// bandwidthSection is the markdown of the bandwidth comparison.
func bandwidthSection(d *data, when string) string {
	var b strings.Builder
	b.WriteString("## Bandwidth: Go against perftest (generated)\n\n")
	fmt.Fprintf(&b, "Generated by `make perf` (%s) from the `BWPERF` lines of `TestVMBandwidth` and `TestTwoHostBandwidth` in cmd/writebw, cmd/readbw, cmd/sendbw and cmd/atomicbw; do not edit between the markers. ", when)
	b.WriteString("Average MB/s (perftest's MB/sec, i.e. MiB/s) that both sides print, their mean per run; median over the rounds, the best round in parentheses. atomicbw runs 8-byte fetch-and-adds: its MB/s is the message rate times 8 B. ")
	b.WriteString("Every round runs the four pairings in an order rotated by one; \"median of the rounds' Go/C\" is the median of each round's Go-Go/C-C, and \"rounds' Go/C, lowest-highest\" their range (a row whose range spans 1.0 had Go ahead in some rounds and behind in others); \"Go client / C client\" (write, read and atomic, whose servers only wait) is the median of the runs with a Go client over the median of those with a C client. The goal is Go/C at least 1.0.\n\n")
	var all, allPooled []float64
	var below, above, mixed int // rows by their rounds' Go/C: all < 1, all >= 1, both
	for _, rs := range byPlace(d.bw, func(r *bwtest.PerfResult) (string, string, string) { return r.Place, r.Kernel, r.Tool }) {
		r0 := rs[0]
		where := "one host, " + r0.Place
		if r0.Place == "two hosts" {
			where = "two hosts (server on A, client on B, rxew over the virtual wire)"
		}
		fmt.Fprintf(&b, "### %s, kernel %s\n\n", where, r0.Kernel)
		b.WriteString("| tool | size | Go-Go | C-C | Go server, C client | C server, Go client | Go/C of the medians | median of the rounds' Go/C | rounds' Go/C, lowest-highest | Go client / C client |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		var notes []string
		for _, r := range rs {
			var sizes []int
			for s := range r.MBs {
				n, _ := strconv.Atoi(s)
				sizes = append(sizes, n)
			}
			sort.Ints(sizes)
			for _, size := range sizes {
				m := r.MBs[strconv.Itoa(size)]
				cell := func(p string) string {
					v := m[p]
					if len(v) == 0 {
						return "-"
					}
					return fmt.Sprintf("%s (%s)", num(bwtest.Median(v)), num(slices.Max(v)))
				}
				ratios := roundRatios(m[goGo], m[cC])
				rr := bwtest.Median(ratios)
				all = append(all, rr)
				span := "-"
				if len(ratios) > 0 {
					lo, hi := slices.Min(ratios), slices.Max(ratios)
					span = fmt.Sprintf("%.2f-%.2f", lo, hi)
					switch {
					case hi < 1:
						below++
					case lo >= 1:
						above++
					default:
						mixed++
					}
				}
				// Write and read servers only wait: the client alone moves
				// the data, so the runs with a Go client (Go-Go, C server
				// with Go client) and with a C client pool into twice the
				// samples.
				pooled := "-"
				if r.Tool != "sendbw" {
					goCli := append(slices.Clone(m[goGo]), m[cGo]...)
					cCli := append(slices.Clone(m[cC]), m[goC]...)
					pr := bwtest.Median(goCli) / bwtest.Median(cCli)
					allPooled = append(allPooled, pr)
					pooled = fmt.Sprintf("%.2f", pr)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s | %s |\n", r.Tool, sizeStr(size), cell(goGo), cell(cC), cell(goC), cell(cGo),
					bwtest.Median(m[goGo])/bwtest.Median(m[cC]), rr, span, pooled)
			}
			var its []string
			for _, size := range sizes {
				its = append(its, fmt.Sprintf("%d x %s", r.Iters[strconv.Itoa(size)], sizeStr(size)))
			}
			notes = append(notes, fmt.Sprintf("%s: %d rounds of %s (%s)%s", r.Tool, r.Rounds, strings.Join(its, ", "), (time.Duration(r.Seconds)*time.Second).String(), argsNote(r.Args)))
		}
		fmt.Fprintf(&b, "\n%s; clocksource %s.\n\n", strings.Join(notes, "; "), r0.Clocksource)
		for _, r := range rs {
			if len(r.Failures) > 0 {
				fmt.Fprintf(&b, "%s: %d runs failed and were repeated: %s.\n\n", r.Tool, len(r.Failures), strings.Join(r.Failures, "; "))
			}
		}
	}
	b.WriteString(spread("The median of the rounds' Go/C", all, "at or above", func(x float64) bool { return x >= 1 }))
	if below+above+mixed > 0 {
		fmt.Fprintf(&b, "Round by round: in %d rows Go-Go was behind C-C in every round, in %d ahead or level in every round, and in %d rows ahead in some rounds and behind in others.\n\n", below, above, mixed)
	}
	b.WriteString(spread("Go client / C client (write, read and atomic)", allPooled, "at or above", func(x float64) bool { return x >= 1 }))
	return b.String()
}

// argsNote is ", arguments ..." for a comparison run with more
// arguments (-bw.args), else "".
func argsNote(args string) string {
	if args == "" {
		return ""
	}
	return fmt.Sprintf(", arguments `%s`", args)
}

// latToolsSection is the markdown of the latency tools' comparison.
func latToolsSection(d *data, when string) string {
	var b strings.Builder
	b.WriteString("## Latency tools: Go against perftest (generated)\n\n")
	fmt.Fprintf(&b, "Generated by `make perf` (%s) from the `LATPERF` lines of `TestVMLatency` in cmd/writelat, cmd/sendlat, cmd/readlat and cmd/atomiclat; do not edit between the markers. ", when)
	b.WriteString("The client's t_typical in usec (perftest's median sample: half a round trip for write and send, a whole read or atomic), median over the rounds, the best round in parentheses. ")
	b.WriteString("Every round runs the four pairings in an order rotated by one; \"typical Go/C\" and \"average Go/C\" are the medians of each round's Go-Go/C-C of t_typical and of t_avg, and \"rounds Go behind\" counts the rounds whose Go-Go t_typical was above C-C's. ib_write_lat has no event mode; atomiclat runs 8-byte fetch-and-adds. The goal is Go/C at most 1.0.\n\n")
	var typAll, avgAll []float64
	for _, rs := range byPlace(d.latTools, func(r *bwtest.LatPerfResult) (string, string, string) { return r.Place, r.Kernel, r.Tool }) {
		r0 := rs[0]
		fmt.Fprintf(&b, "### one host, %s, kernel %s\n\n", r0.Place, r0.Kernel)
		b.WriteString("| tool | mode | size | Go-Go | C-C | Go server, C client | C server, Go client | typical Go/C | rounds Go behind | average Go/C |\n")
		b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		var notes, skips []string
		for _, r := range rs {
			var sizes []int
			for s := range r.Iters {
				n, _ := strconv.Atoi(s)
				sizes = append(sizes, n)
			}
			sort.Ints(sizes)
			for _, mode := range r.Modes {
				for _, size := range sizes {
					key := strconv.Itoa(size)
					typ, avg := r.Typical[mode][key], r.Avg[mode][key]
					cell := func(p string) string {
						v := typ[p]
						if len(v) == 0 {
							return "-"
						}
						return fmt.Sprintf("%.2f (%.2f)", bwtest.Median(v), slices.Min(v))
					}
					tr, ar := roundRatios(typ[goGo], typ[cC]), roundRatios(avg[goGo], avg[cC])
					ratio := func(v []float64, all *[]float64) string {
						if len(v) == 0 {
							return "-"
						}
						m := bwtest.Median(v)
						*all = append(*all, m)
						return fmt.Sprintf("%.2f", m)
					}
					behind := "-"
					if len(tr) > 0 {
						n := 0
						for _, x := range tr {
							if x > 1 {
								n++
							}
						}
						behind = fmt.Sprintf("%d of %d", n, len(tr))
					}
					mname := mode
					if mode == "poll" {
						mname = "polling"
					}
					fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Tool, mname, sizeStr(size),
						cell(goGo), cell(cC), cell(goC), cell(cGo), ratio(tr, &typAll), behind, ratio(ar, &avgAll))
				}
			}
			var its []string
			for _, size := range sizes {
				its = append(its, fmt.Sprintf("%d x %s", r.Iters[strconv.Itoa(size)], sizeStr(size)))
			}
			notes = append(notes, fmt.Sprintf("%s: %d rounds of %s (%s)%s", r.Tool, r.Rounds, strings.Join(its, ", "),
				(time.Duration(r.Seconds)*time.Second).String(), argsNote(r.Args)))
			for _, mode := range r.Modes {
				// The pairings left out, grouped by the reason.
				byWhy := map[string][]string{}
				var whys []string
				for _, p := range []string{goGo, cC, goC, cGo} {
					if why, ok := r.Skipped[mode][p]; ok {
						if byWhy[why] == nil {
							whys = append(whys, why)
						}
						byWhy[why] = append(byWhy[why], p)
					}
				}
				for _, why := range whys {
					skips = append(skips, fmt.Sprintf("%s %s: %s not run (%s)", r.Tool, mode, strings.Join(byWhy[why], ", "), why))
				}
			}
		}
		fmt.Fprintf(&b, "\n%s; clocksource %s.\n\n", strings.Join(notes, "; "), r0.Clocksource)
		if len(skips) > 0 {
			fmt.Fprintf(&b, "%s.\n\n", strings.Join(skips, "; "))
		}
		for _, r := range rs {
			if len(r.Failures) > 0 {
				fmt.Fprintf(&b, "%s: %d runs failed and were repeated: %s.\n\n", r.Tool, len(r.Failures), strings.Join(r.Failures, "; "))
			}
		}
	}
	atMost := func(x float64) bool { return x <= 1 }
	b.WriteString(spread("Typical Go/C", typAll, "at or below", atMost))
	b.WriteString(spread("Average Go/C", avgAll, "at or below", atMost))
	return b.String()
}

// byPlace groups results by place and kernel, one host before two hosts,
// then by place and kernel; within a group, in toolOrder.
func byPlace[R any](rs []R, key func(R) (place, kernel, tool string)) [][]R {
	groups := map[[2]string][]R{}
	var order [][2]string
	for _, r := range rs {
		p, k, _ := key(r)
		if groups[[2]string{p, k}] == nil {
			order = append(order, [2]string{p, k})
		}
		groups[[2]string{p, k}] = append(groups[[2]string{p, k}], r)
	}
	sort.Slice(order, func(i, j int) bool {
		pi, pj := order[i][0], order[j][0]
		if (pi == "two hosts") != (pj == "two hosts") {
			return pj == "two hosts"
		}
		if pi != pj {
			return pi < pj
		}
		return kernelOrder(order[i][1], order[j][1]) < 0
	})
	out := make([][]R, 0, len(order))
	for _, o := range order {
		g := groups[o]
		sort.SliceStable(g, func(i, j int) bool {
			_, _, ti := key(g[i])
			_, _, tj := key(g[j])
			return toolOrder[ti] < toolOrder[tj]
		})
		out = append(out, g)
	}
	return out
}

// spread is a summary line of ratios: their range and median, and how
// many rows meet the goal (good, said as "at or above"/"at or below").
func spread(what string, v []float64, goal string, good func(float64) bool) string {
	if len(v) == 0 {
		return ""
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := 0
	for _, x := range s {
		if good(x) {
			n++
		}
	}
	return fmt.Sprintf("%s: from %.2f to %.2f over %d rows (median %.2f); %d rows %s 1.0.\n\n", what, s[0], s[len(s)-1], len(s), bwtest.Median(s), n, goal)
}

// num is v with three significant digits (at least the units): the
// atomic rate across the wire is under 0.1 MB/s.
func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1 || v == 0:
		return fmt.Sprintf("%.2f", v)
	case v >= 0.1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

func sizeStr(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// latencySection is the markdown of the latency-by-size comparison.
func latencySection(d *data, when, svg string) string {
	var b strings.Builder
	b.WriteString("## Latency by message size (generated)\n\n")
	fmt.Fprintf(&b, "Generated by `make perf` (%s) from the round lines of cmd/rcpingpong's `TestVMPerformance` (polling, and `-pp.args=-e`); do not edit between the markers. ", when)
	b.WriteString("usec/iter of `rcpingpong` (Go) and `ibv_rc_pingpong` (C), the mean of what the two sides print, median over the rounds (best round in parentheses); Go/C is the median of the rounds' Go-Go/C-C, and in parentheses the rounds in which Go-Go was slower than C-C. The goal is Go/C at most 1.0.\n\n")
	fmt.Fprintf(&b, "![Ping-pong latency by message size, Go against C, polling and event mode, kernels 6.1 and 6.12](%s)\n\n", svg)
	var kernels []string
	seen := map[string]bool{}
	for k := range d.lat {
		if !seen[k.Kernel] {
			seen[k.Kernel] = true
			kernels = append(kernels, k.Kernel)
		}
	}
	slices.SortFunc(kernels, kernelOrder)
	for _, kern := range kernels {
		poll, ev := d.lat[latKey{kern, false}], d.lat[latKey{kern, true}]
		var info []string
		how := func(d *latData) string {
			return fmt.Sprintf("%d rounds of %s on %s, clocksource %s", d.Rounds, d.Iters, d.Dev, d.Clocksource)
		}
		if poll != nil && ev != nil && how(poll) == how(ev) {
			info = append(info, "polling and events: "+how(poll))
		} else {
			for _, x := range []struct {
				name string
				d    *latData
			}{{"polling", poll}, {"events", ev}} {
				if x.d != nil {
					info = append(info, x.name+": "+how(x.d))
				}
			}
		}
		fmt.Fprintf(&b, "### Kernel %s\n\n%s.\n\n", kern, strings.Join(info, "; "))
		b.WriteString("| size | polling Go-Go | polling C-C | polling Go/C | events Go-Go | events C-C | events Go/C |\n")
		b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		sizes := map[int]bool{}
		for _, x := range []*latData{poll, ev} {
			if x != nil {
				for s := range x.USec {
					sizes[s] = true
				}
			}
		}
		var ss []int
		for s := range sizes {
			ss = append(ss, s)
		}
		sort.Ints(ss)
		for _, s := range ss {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", sizeStr(s),
				latCell(poll, s, goGo), latCell(poll, s, cC), latRatio(poll, s), latCell(ev, s, goGo), latCell(ev, s, cC), latRatio(ev, s))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func latCell(d *latData, size int, pair string) string {
	if d == nil || len(d.USec[size][pair]) == 0 {
		return "-"
	}
	v := d.USec[size][pair]
	return fmt.Sprintf("%.0f (%.0f)", bwtest.Median(v), slices.Min(v))
}

func latRatio(d *latData, size int) string {
	if d == nil {
		return "-"
	}
	r := roundRatios(d.USec[size][goGo], d.USec[size][cC])
	if len(r) == 0 {
		return "-"
	}
	slower := 0
	for _, x := range r {
		if x > 1 {
			slower++
		}
	}
	return fmt.Sprintf("%.2f (%d of %d)", bwtest.Median(r), slower, len(r))
}

// roundRatios is each round's Go-Go over its C-C (the rounds both have):
// runs seconds apart under about the same host load.
func roundRatios(goGo, cC []float64) []float64 {
	var r []float64
	for i := range min(len(goGo), len(cC)) {
		r = append(r, goGo[i]/cC[i])
	}
	return r
}

// replaceSection puts body between the markers of name, or appends the
// marked section. A generated section has one "## " heading, its own:
// when what lies between the markers has more, hand-written sections
// were put inside them, and replacing it would delete them, so it
// fails instead.
func replaceSection(doc, name, body string) (string, error) {
	begin := "<!-- BEGIN perf:" + name + " (make perf rewrites this section) -->\n"
	end := "<!-- END perf:" + name + " -->\n"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		if !strings.HasSuffix(doc, "\n\n") {
			doc = strings.TrimRight(doc, "\n") + "\n\n"
		}
		return doc + begin + body + end, nil
	}
	var heads []string
	for _, l := range strings.Split(doc[i+len(begin):j], "\n") {
		if strings.HasPrefix(l, "## ") {
			heads = append(heads, strings.TrimPrefix(l, "## "))
		}
	}
	if len(heads) > 1 {
		return "", fmt.Errorf("the generated section %q holds %d sections (%s): move the hand-written ones out of its markers first",
			name, len(heads), strings.Join(heads, "; "))
	}
	return doc[:i+len(begin)] + body + doc[j:], nil
}

func main() {
	docPath := flag.String("doc", "docs/performance.md", "the document to update")
	svgPath := flag.String("svg", "docs/latency.svg", "the latency plot to write ('' for none)")
	svgLink := flag.String("svg-link", "latency.svg", "the plot's path as the document links it")
	flag.Parse()
	d := &data{lat: map[latKey]*latData{}}
	var bwTime, latTime, toolsTime time.Time
	for _, f := range flag.Args() {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfdoc:", err)
			os.Exit(1)
		}
		nbw, nlat, ntools := len(d.bw), latCount(d), len(d.latTools)
		if err := parse(bytes.NewReader(b), d); err != nil {
			fmt.Fprintf(os.Stderr, "perfdoc: %s: %v\n", f, err)
			os.Exit(1)
		}
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfdoc:", err)
			os.Exit(1)
		}
		w := when(string(b), fi.ModTime())
		if len(d.bw) > nbw && !fi.ModTime().Before(bwTime) {
			bwTime, d.bwWhen = fi.ModTime(), w
		}
		if latCount(d) > nlat && !fi.ModTime().Before(latTime) {
			latTime, d.latWhen = fi.ModTime(), w
		}
		if len(d.latTools) > ntools && !fi.ModTime().Before(toolsTime) {
			toolsTime, d.latToolsWhen = fi.ModTime(), w
		}
	}
	if len(d.bw) == 0 && len(d.lat) == 0 && len(d.latTools) == 0 {
		fmt.Fprintln(os.Stderr, "perfdoc: no BWPERF, LATPERF or TestVMPerformance results in", flag.Args())
		os.Exit(1)
	}
	raw, err := os.ReadFile(*docPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfdoc:", err)
		os.Exit(1)
	}
	doc := string(raw)
	sections := []struct {
		name string
		have bool
		body func() string
	}{
		{"bandwidth", len(d.bw) > 0, func() string { return bandwidthSection(d, d.bwWhen) }},
		{"lattools", len(d.latTools) > 0, func() string { return latToolsSection(d, d.latToolsWhen) }},
		{"latency", len(d.lat) > 0, func() string { return latencySection(d, d.latWhen, *svgLink) }},
	}
	for _, sec := range sections {
		if !sec.have {
			continue
		}
		if doc, err = replaceSection(doc, sec.name, sec.body()); err != nil {
			fmt.Fprintf(os.Stderr, "perfdoc: %s: %v\n", *docPath, err)
			os.Exit(1)
		}
	}
	if len(d.lat) > 0 {
		if *svgPath != "" {
			if err := os.WriteFile(*svgPath, []byte(plot(d)), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "perfdoc:", err)
				os.Exit(1)
			}
		}
	}
	if err := os.WriteFile(*docPath, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "perfdoc:", err)
		os.Exit(1)
	}
	fmt.Printf("perfdoc: %d bandwidth comparisons, %d latency tools' comparisons, %d latency series -> %s", len(d.bw), len(d.latTools), len(d.lat), *docPath)
	if len(d.lat) > 0 && *svgPath != "" {
		fmt.Printf(", %s", *svgPath)
	}
	fmt.Println()
}

// hostLine is what make perf appends to each log when the run ends: the
// date, the host's CPUs and its load average then.
const hostLine = "PERFHOST "

// when says when and where a log's results were measured, for a
// section's header: from its PERFHOST line, or, in a log without one
// (older runs), its modification date and the host's CPU count.
func when(log string, mod time.Time) string {
	for _, l := range strings.Split(log, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), hostLine); ok {
			return rest
		}
	}
	return fmt.Sprintf("%s, %d-CPU host, QEMU TCG guests, load average not recorded", mod.Format("2006-01-02"), hostCPUs())
}

// latCount is the number of latency runs in d.
func latCount(d *data) int {
	n := 0
	for _, l := range d.lat {
		for _, pairs := range l.USec {
			for _, v := range pairs {
				n += len(v)
			}
		}
	}
	return n
}

// hostCPUs is this machine's CPU count (/proc/cpuinfo).
func hostCPUs() int {
	cpus := 0
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cpus = strings.Count(string(b), "\nprocessor") + 1
	}
	return cpus
}
