package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
)

// A log as the runner prints it: rcpingpong's header and round lines
// (two kernels, one with -e and iterations per size), a bandwidth test's
// header, rounds and BWPERF line, and console noise.
const sampleLog = `rxevm: === kernel 6.1 ===
    perf_vm_test.go:61: kernel 6.1.0-57-amd64, device rxe0, 2 rounds, 200 iterations per run, arguments "", clocksource tsc
    perf_vm_test.go:98: round 1 size 64: go-server-go-client 60.00, c-server-c-client 40.00, go-server-c-client 50.00, c-server-go-client 55.00
    perf_vm_test.go:98: round 1 size 4096: c-server-c-client 200.00, go-server-c-client 210.00, c-server-go-client 220.00, go-server-go-client 230.00
[   12.345678] rxe: some kernel line
    perf_vm_test.go:98: round 2 size 64: c-server-c-client 50.00, go-server-c-client 52.00, c-server-go-client 53.00, go-server-go-client 50.00
    perf_vm_test.go:98: round 2 size 4096: go-server-c-client 211.00, c-server-go-client 221.00, go-server-go-client 190.00, c-server-c-client 200.00
    bwtest.go:374: writebw against ib_write_bw: kernel 6.1.0-57-amd64, rxe0, 1 rounds, 200 iterations per run, arguments "", clocksource tsc
    bwtest.go:396: round 1 size 65536: go-server-go-client 26.64, c-server-c-client 31.96, go-server-c-client 34.68, c-server-go-client 32.52
    bwtest.go:406: BWPERF {"tool":"writebw","kernel":"6.1.0-57-amd64","place":"rxe0","iters":{"65536":200},"rounds":1,"args":"","clocksource":"tsc","seconds":6.6,"failures":["round 1, go-server-c-client, 4096 B: Failed status 9: wr_id 0 syndrom 0x0"],"mbs":{"65536":{"c-server-c-client":[31.96],"c-server-go-client":[32.52],"go-server-c-client":[34.68],"go-server-go-client":[26.64]}}}
rxevm: === kernel 6.12 ===
    perf_vm_test.go:61: kernel 6.12.107+deb12-amd64, device rxe0, 1 rounds, sizes 64,4096 with 3000,200 iterations per run, arguments "-e", environment "", clocksource tsc
    perf_vm_test.go:98: round 1 size 64: go-server-go-client 300.00, c-server-c-client 250.00, go-server-c-client 260.00, c-server-go-client 270.00
`

func TestParseAndSections(t *testing.T) {
	d := &data{lat: map[latKey]*latData{}}
	if err := parse(strings.NewReader(sampleLog), d); err != nil {
		t.Fatal(err)
	}
	if len(d.bw) != 1 || d.bw[0].Tool != "writebw" || d.bw[0].MBs["65536"]["go-server-go-client"][0] != 26.64 {
		t.Fatalf("bandwidth: %+v", d.bw)
	}
	p61 := d.lat[latKey{"6.1.0-57-amd64", false}]
	e612 := d.lat[latKey{"6.12.107+deb12-amd64", true}]
	if len(d.lat) != 2 || p61 == nil || e612 == nil {
		t.Fatalf("latency series: %+v", d.lat)
	}
	// The bandwidth test's round line is not a latency round.
	if g := p61.USec[64][goGo]; len(g) != 2 || g[0] != 60 || g[1] != 50 || len(p61.USec[65536]) != 0 {
		t.Errorf("6.1 polling 64 B Go-Go %v, sizes %v", g, p61.USec)
	}
	lat := latencySection(d, "today", "latency.svg")
	// 64 B: Go-Go median 55 (best 50), C-C 45 (40), rounds' Go/C 1.5 and
	// 1.0 -> 1.25, Go slower in one round of two (level in the other).
	for _, want := range []string{"| 64 B | 55 (50) | 45 (40) | 1.25 (1 of 2) | - | - | - |", "| 64 B | - | - | - | 300 (300) | 250 (250) | 1.20 (1 of 1) |",
		"### Kernel 6.1.0-57-amd64", "### Kernel 6.12.107+deb12-amd64", "![Ping-pong latency",
		"polling: 2 rounds of 200 iterations on rxe0, clocksource tsc.", "events: 1 rounds of 3000 x 64 B, 200 x 4 KiB on rxe0, clocksource tsc."} {
		if !strings.Contains(lat, want) {
			t.Errorf("latency section lacks %q:\n%s", want, lat)
		}
	}
	bwSec := bandwidthSection(d, "today")
	for _, want := range []string{"### one host, rxe0, kernel 6.1.0-57-amd64", "| writebw | 64 KiB | 26.6 (26.6) | 32.0 (32.0) | 34.7 (34.7) | 32.5 (32.5) | 0.83 | 0.83 | 0.83-0.83 | 0.89 |",
		"in 1 rows Go-Go was behind C-C in every round, in 0 ahead or level in every round, and in 0 rows",
		"from 0.83 to 0.83 over 1 rows (median 0.83); 0 rows at or above 1.0",
		"writebw: 1 runs failed and were repeated: round 1, go-server-c-client, 4096 B: Failed status 9: wr_id 0 syndrom 0x0."} {
		if !strings.Contains(bwSec, want) {
			t.Errorf("bandwidth section lacks %q:\n%s", want, bwSec)
		}
	}
	svg := plot(d)
	for _, want := range []string{"<svg ", "kernel 6.1.0-57-amd64", "Go, events (-e)", "6.1.0-57-amd64 Go (rcpingpong), polling: 64 B 55 usec", "median of 2 rounds of 200-3000 iterations", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	doc := "# Title\n\nhand-written\n"
	a, err := replaceSection(doc, "x", "one\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Title\n\nhand-written\n\n<!-- BEGIN perf:x (make perf rewrites this section) -->\none\n<!-- END perf:x -->\n"; a != want {
		t.Fatalf("appended:\n%q\nwant\n%q", a, want)
	}
	b, err := replaceSection(a+"\nafter\n", "x", "## Generated\n\ntwo\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(a, "one\n", "## Generated\n\ntwo\n", 1) + "\nafter\n"; b != want {
		t.Fatalf("replaced:\n%q\nwant\n%q", b, want)
	}
	// A hand-written section inside the markers is not deleted.
	hand := strings.Replace(b, "## Generated\n", "## Hand-written\n\nkeep me\n\n## Generated\n", 1)
	if got, err := replaceSection(hand, "x", "## Generated\n\nthree\n"); err == nil || !strings.Contains(err.Error(), "Hand-written; Generated") {
		t.Fatalf("a hand-written section inside the markers: err %v, document\n%s", err, got)
	}
}

// TestParseLatencyHeaders: a TestVMPerformance run with an environment
// (-pp.env) is an experiment and no series; one whose header perfdoc
// cannot read is an error, not a stale plot.
func TestParseLatencyHeaders(t *testing.T) {
	d := &data{lat: map[latKey]*latData{}}
	exp := `=== RUN   TestVMPerformance
    perf_vm_test.go:79: kernel 6.1.0-57-amd64, device rxe0, 1 rounds, 200 iterations per run, arguments "", environment "GOMAXPROCS=1", clocksource tsc
    perf_vm_test.go:101: round 1 size 64: go-server-go-client 60.00, c-server-c-client 40.00, go-server-c-client 50.00, c-server-go-client 55.00
`
	if err := parse(strings.NewReader(exp), d); err != nil || len(d.lat) != 0 {
		t.Fatalf("experiment run: err %v, series %v", err, d.lat)
	}
	bad := strings.Replace(exp, "iterations per run", "iterations in each run", 1)
	if err := parse(strings.NewReader(bad), d); err == nil {
		t.Fatal("a header perfdoc cannot read went unnoticed")
	}
	bad = strings.Replace(exp, "200 iterations", "sizes 64,4096 with 3000,200,100 iterations", 1)
	if err := parse(strings.NewReader(bad), d); err == nil {
		t.Fatal("three iteration counts for two sizes went unnoticed")
	}
}

// TestWhen: a section's header says when and where its log was
// measured: the log's PERFHOST line, else the log's date with the load
// average not recorded.
func TestWhen(t *testing.T) {
	mod := time.Date(2026, 11, 30, 13, 41, 0, 0, time.UTC)
	log := "=== RUN TestVMPerformance\n" + hostLine + "2026-12-01, 2-CPU host, QEMU TCG guests, host load average 0.5 1.0 1.5\nPASS\n"
	if got, want := when(log, mod), "2026-12-01, 2-CPU host, QEMU TCG guests, host load average 0.5 1.0 1.5"; got != want {
		t.Errorf("with the line: %q, want %q", got, want)
	}
	got := when("=== RUN TestVMPerformance\nPASS\n", mod)
	if !strings.HasPrefix(got, "2026-11-30, ") || !strings.HasSuffix(got, "load average not recorded") {
		t.Errorf("without the line: %q", got)
	}
}

// TestBandwidthRounds: each row shows the range of its rounds' Go/C, and
// the summary sorts the rows into behind in every round, ahead or level
// in every round, and both.
func TestBandwidthRounds(t *testing.T) {
	pairs := func(gg, cc []float64) map[string][]float64 {
		return map[string][]float64{goGo: gg, cC: cc, goC: cc, cGo: gg}
	}
	d := &data{bw: []*bwtest.PerfResult{{
		Tool: "sendbw", Kernel: "6.1.0-57-amd64", Place: "rxe0", Rounds: 3, Clocksource: "tsc",
		Iters: map[string]int{"64": 100, "4096": 100, "65536": 100},
		MBs: map[string]map[string][]float64{
			"64":    pairs([]float64{9, 8, 9.5}, []float64{10, 10, 10}),  // 0.9, 0.8, 0.95: behind
			"4096":  pairs([]float64{10, 11, 12}, []float64{10, 10, 10}), // 1.0, 1.1, 1.2: ahead or level
			"65536": pairs([]float64{9, 11, 10}, []float64{10, 10, 10}),  // 0.9, 1.1, 1.0: both
		},
	}}}
	sec := bandwidthSection(d, "today")
	for _, want := range []string{
		"| sendbw | 64 B | 9.00 (9.50) | 10.0 (10.0) | 10.0 (10.0) | 9.00 (9.50) | 0.90 | 0.90 | 0.80-0.95 | - |",
		"| sendbw | 4 KiB | 11.0 (12.0) | 10.0 (10.0) | 10.0 (10.0) | 11.0 (12.0) | 1.10 | 1.10 | 1.00-1.20 | - |",
		"| sendbw | 64 KiB | 10.0 (11.0) | 10.0 (10.0) | 10.0 (10.0) | 10.0 (11.0) | 1.00 | 1.00 | 0.90-1.10 | - |",
		"in 1 rows Go-Go was behind C-C in every round, in 1 ahead or level in every round, and in 1 rows ahead in some rounds and behind in others.",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %q:\n%s", want, sec)
		}
	}
}

// TestLatencyRunsSaidOnce: polling and events measured alike are
// described once.
func TestLatencyRunsSaidOnce(t *testing.T) {
	d := &data{lat: map[latKey]*latData{}}
	for _, ev := range []bool{false, true} {
		d.lat[latKey{"6.1.0-57-amd64", ev}] = &latData{Iters: "3000 x 2 B, 200 x 64 KiB", Rounds: 15, Dev: "rxe0", Clocksource: "tsc",
			USec: map[int]map[string][]float64{2: {goGo: {60}, cC: {50}}}}
	}
	want := "polling and events: 15 rounds of 3000 x 2 B, 200 x 64 KiB on rxe0, clocksource tsc.\n"
	if sec := latencySection(d, "today", "latency.svg"); !strings.Contains(sec, want) {
		t.Errorf("latency section lacks %q:\n%s", want, sec)
	}
	d.lat[latKey{"6.1.0-57-amd64", true}].Rounds = 5
	want = "polling: 15 rounds of 3000 x 2 B, 200 x 64 KiB on rxe0, clocksource tsc; events: 5 rounds of"
	if sec := latencySection(d, "today", "latency.svg"); !strings.Contains(sec, want) {
		t.Errorf("latency section lacks %q:\n%s", want, sec)
	}
}

// TestLatencyTools: a LATPERF line becomes a row per mode and size, with
// the medians of the client's t_typical, the rounds' Go/C of the typical
// and the average, the rounds Go was behind, and the skipped pairings;
// the bandwidth test's header before it does not start a ping-pong
// series.
func TestLatencyTools(t *testing.T) {
	log := `    bwtest.go:374: sendlat against ib_send_lat: kernel 6.12.107+deb12-amd64, rxe0, 2 rounds, 3000 x 2 B, modes poll -e, arguments "", clocksource tsc
    latperf.go:130: round 1 poll size 2 (typical/avg usec): go-server-go-client 12.00/15.00, c-server-c-client 10.00/12.00
    latperf.go:150: LATPERF {"tool":"sendlat","kernel":"6.12.107+deb12-amd64","place":"rxe0","iters":{"2":3000},"rounds":2,"args":"","clocksource":"tsc","seconds":61,"modes":["poll","-e"],` +
		`"typical":{"poll":{"2":{"go-server-go-client":[12,9],"c-server-c-client":[10,10],"go-server-c-client":[11,11],"c-server-go-client":[10.5,10]}},"-e":{"2":{"go-server-go-client":[40,44]}}},` +
		`"avg":{"poll":{"2":{"go-server-go-client":[15,11],"c-server-c-client":[12,10]}},"-e":{"2":{"go-server-go-client":[50,52]}}},` +
		`"skipped":{"-e":{"c-server-c-client":"ib_send_lat -e hangs on this kernel, against itself too"}},"failures":["round 2, poll, c-server-go-client, 2 B: Failed status 12"]}
`
	d := &data{lat: map[latKey]*latData{}}
	if err := parse(strings.NewReader(log), d); err != nil {
		t.Fatal(err)
	}
	if len(d.latTools) != 1 || len(d.lat) != 0 || len(d.bw) != 0 {
		t.Fatalf("parsed %d latency tools' results, %d ping-pong series, %d bandwidth", len(d.latTools), len(d.lat), len(d.bw))
	}
	sec := latToolsSection(d, "today")
	// Polling: Go-Go median 10.5 (best 9), C-C 10; typical ratios 1.2
	// and 0.9 -> 1.05, one round behind; averages 1.25 and 1.1 -> 1.18
	// (1.175).
	for _, want := range []string{
		"### one host, rxe0, kernel 6.12.107+deb12-amd64",
		"| sendlat | polling | 2 B | 10.50 (9.00) | 10.00 (10.00) | 11.00 (11.00) | 10.25 (10.00) | 1.05 | 1 of 2 | 1.18 |",
		"| sendlat | -e | 2 B | 42.00 (40.00) | - | - | - | - | - | - |",
		"sendlat: 2 rounds of 3000 x 2 B (1m1s); clocksource tsc.",
		"sendlat -e: c-server-c-client not run (ib_send_lat -e hangs on this kernel, against itself too).",
		"sendlat: 1 runs failed and were repeated: round 2, poll, c-server-go-client, 2 B: Failed status 12.",
		"Typical Go/C: from 1.05 to 1.05 over 1 rows (median 1.05); 0 rows at or below 1.0.",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("section lacks %q:\n%s", want, sec)
		}
	}
}

// TestNum: three significant digits at every scale, so that the atomic
// rate across the wire (under 0.1 MB/s) keeps its differences.
func TestNum(t *testing.T) {
	for v, want := range map[float64]string{1234.5: "1234", 45.67: "45.7", 2.345: "2.35", 0.3456: "0.346", 0.09123: "0.0912", 0: "0.00"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}
