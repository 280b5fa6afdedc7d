package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
)

// The plot: one panel per kernel, message size (log 2) across, usec per
// iteration (log 10, shared by the panels) up; Go and C in two colours,
// polling solid and events dashed.
const (
	plotW      = 980
	plotH      = 480
	panelTop   = 106
	panelBot   = 410 // bottom of the plot area
	panelLeft  = 78
	panelGap   = 70
	panelRight = 20
	goColor    = "#007d9c" // Go's dark cyan
	cColor     = "#d9730d"
)

type series struct {
	name   string
	color  string
	dashed bool
	square bool
	pts    [][2]float64 // size, median usec
	best   [][2]float64 // size, best round's usec
}

func plot(d *data) string {
	var kernels []string
	seen := map[string]bool{}
	for k := range d.lat {
		if !seen[k.Kernel] {
			seen[k.Kernel] = true
			kernels = append(kernels, k.Kernel)
		}
	}
	slices.SortFunc(kernels, kernelOrder)
	panels := make([][]series, len(kernels))
	lo, hi := math.Inf(1), math.Inf(-1)
	minSize, maxSize := math.Inf(1), math.Inf(-1)
	var sizesAll []int
	sizeSeen := map[int]bool{}
	rounds, fewest, most := 0, math.MaxInt, 0
	for i, kern := range kernels {
		for _, ev := range []bool{false, true} {
			ld := d.lat[latKey{kern, ev}]
			if ld == nil {
				continue
			}
			rounds, fewest, most = max(rounds, ld.Rounds), min(fewest, ld.IterRange[0]), max(most, ld.IterRange[1])
			mode := "polling"
			if ev {
				mode = "events (-e)"
			}
			for _, impl := range []struct {
				name, pair, color string
				square            bool
			}{{"Go (rcpingpong)", goGo, goColor, false}, {"C (ibv_rc_pingpong)", cC, cColor, true}} {
				s := series{name: impl.name + ", " + mode, color: impl.color, dashed: ev, square: impl.square}
				var sizes []int
				for size := range ld.USec {
					sizes = append(sizes, size)
				}
				sort.Ints(sizes)
				for _, size := range sizes {
					v := ld.USec[size][impl.pair]
					if len(v) == 0 {
						continue
					}
					m, bst := bwtest.Median(v), slices.Min(v)
					if bst <= 0 {
						continue
					}
					s.pts = append(s.pts, [2]float64{float64(size), m})
					s.best = append(s.best, [2]float64{float64(size), bst})
					lo, hi = math.Min(lo, bst), math.Max(hi, m)
					minSize, maxSize = math.Min(minSize, float64(size)), math.Max(maxSize, float64(size))
					if !sizeSeen[size] {
						sizeSeen[size] = true
						sizesAll = append(sizesAll, size)
					}
				}
				panels[i] = append(panels[i], s)
			}
		}
	}
	sort.Ints(sizesAll)
	if math.IsInf(lo, 0) {
		lo, hi, minSize, maxSize = 1, 10, 1, 2
	}
	// y range: the 1-2-5 ticks around the data.
	yLo := niceBelow(lo / 1.15)
	yHi := niceAbove(hi * 1.15)
	if minSize == maxSize {
		minSize, maxSize = minSize/2, maxSize*2
	}
	xLo, xHi := math.Log2(minSize)-0.3, math.Log2(maxSize)+0.3

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="24" text-anchor="middle" font-size="16" font-weight="bold">RC ping-pong latency by message size: Go (rcpingpong) against C (ibv_rc_pingpong)</text>`+"\n", plotW/2)
	fmt.Fprintf(&b, `<text x="%d" y="44" text-anchor="middle" fill="#444">usec per iteration (lower is better): median of %d rounds of %s iterations, thin faded lines the best round; rdma_rxe in QEMU/TCG guests, rxe0</text>`+"\n", plotW/2, rounds, iterSpan(fewest, most))
	// Legend.
	legend := []series{{name: "Go, polling", color: goColor}, {name: "C, polling", color: cColor, square: true},
		{name: "Go, events (-e)", color: goColor, dashed: true}, {name: "C, events (-e)", color: cColor, dashed: true, square: true}}
	width := 0.0
	for _, s := range legend {
		width += 42 + float64(len(s.name))*7.6 + 28
	}
	lx := (plotW - width + 28) / 2
	for _, s := range legend {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="64" x2="%.1f" y2="64" stroke="%s" stroke-width="2.5"%s/>`, lx, lx+34, s.color, dash(s.dashed))
		marker(&b, lx+17, 64, s)
		fmt.Fprintf(&b, `<text x="%.1f" y="68">%s</text>`+"\n", lx+42, html.EscapeString(s.name))
		lx += 42 + float64(len(s.name))*7.6 + 28
	}
	pw := (float64(plotW) - panelLeft - panelRight - float64(len(kernels)-1)*panelGap) / float64(max(len(kernels), 1))
	for i, kern := range kernels {
		x0 := panelLeft + float64(i)*(pw+panelGap)
		x1 := x0 + pw
		xs := func(size float64) float64 { return x0 + (math.Log2(size)-xLo)/(xHi-xLo)*pw }
		ys := func(v float64) float64 {
			return panelBot - (math.Log10(v)-math.Log10(yLo))/(math.Log10(yHi)-math.Log10(yLo))*(panelBot-panelTop)
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#fbfbfb" stroke="#999"/>`+"\n", x0, panelTop, pw, panelBot-panelTop)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">kernel %s</text>`+"\n", (x0+x1)/2, panelTop-8, html.EscapeString(kern))
		for _, t := range yTicks(yLo, yHi) {
			y := ys(t)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`, x0, y, x1, y)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", x0-6, y+4, tickLabel(t))
		}
		for _, s := range sizesAll {
			x := xs(float64(s))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>`, x, panelTop, x, panelBot)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>`+"\n", x, panelBot+18, sizeStr(s))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">message size</text>`+"\n", (x0+x1)/2, panelBot+40)
		if i == 0 {
			fmt.Fprintf(&b, `<text x="20" y="%d" text-anchor="middle" transform="rotate(-90 20 %d)">usec per iteration (log scale)</text>`+"\n", (panelTop+panelBot)/2, (panelTop+panelBot)/2)
		}
		for _, s := range panels[i] {
			var best []string
			for _, p := range s.best {
				best = append(best, fmt.Sprintf("%.1f,%.1f", xs(p[0]), ys(p[1])))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-opacity="0.4" stroke-width="1.2"%s points="%s"><title>best round: %s, kernel %s</title></polyline>`+"\n",
				s.color, dash(s.dashed), strings.Join(best, " "), html.EscapeString(s.name), html.EscapeString(kern))
			for _, p := range s.best {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s" fill-opacity="0.5"/>`, xs(p[0]), ys(p[1]), s.color)
			}
		}
		for _, s := range panels[i] {
			var pts []string
			for _, p := range s.pts {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(p[0]), ys(p[1])))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.5"%s points="%s"><title>%s, kernel %s</title></polyline>`+"\n",
				s.color, dash(s.dashed), strings.Join(pts, " "), html.EscapeString(s.name), html.EscapeString(kern))
			for _, p := range s.pts {
				marker(&b, xs(p[0]), ys(p[1]), s)
				fmt.Fprintf(&b, "<!-- %s %s: %s %.0f usec -->\n", kern, s.name, sizeStr(int(p[0])), p[1])
			}
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#666" font-size="11">generated by make perf (internal/bw/perfdoc) from cmd/rcpingpong TestVMPerformance; tables in docs/performance.md</text>`+"\n", plotW-10, plotH-10)
	b.WriteString("</svg>\n")
	return b.String()
}

func dash(d bool) string {
	if d {
		return ` stroke-dasharray="7 4"`
	}
	return ""
}

// marker draws a point: a circle for Go, a square for C; filled when
// polling, hollow (white) for events.
func marker(b *strings.Builder, x, y float64, s series) {
	fill := s.color
	if s.dashed {
		fill = "white"
	}
	if s.square {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="9" height="9" fill="%s" stroke="%s" stroke-width="2"/>`, x-4.5, y-4.5, fill, s.color)
	} else {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s" stroke="%s" stroke-width="2"/>`, x, y, fill, s.color)
	}
}

// niceBelow and niceAbove round to the 1-2-5 sequence.
func niceBelow(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if m*e <= v {
			return m * e
		}
	}
	return e
}

func niceAbove(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func yTicks(lo, hi float64) []float64 {
	var t []float64
	for e := math.Pow(10, math.Floor(math.Log10(lo))); e <= hi; e *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * e; v >= lo*0.999 && v <= hi*1.001 {
				t = append(t, v)
			}
		}
	}
	return t
}

func tickLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// iterSpan is "200", or "200-3000" when the runs' sizes had different
// iteration counts.
func iterSpan(fewest, most int) string {
	if fewest >= most {
		return strconv.Itoa(most)
	}
	return fmt.Sprintf("%d-%d", fewest, most)
}
