package bwtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// OutJSON is the test of --out_json and --out_json_file: Go against C
// both ways on rxe0, each side writing its own file. Each file holds the
// figures of the last line its tool printed (a bandwidth tool's average
// and message rate, a latency tool's average), and the Go tool's file
// is the C tool's in the same role line for line: the same test
// description exactly, the same result keys (the figures differ from run
// to run). ib_read_lat's server prints no line and writes no file.
func OutJSON(t *testing.T, tool Tool, extra ...string) {
	testkit.RequireVM(t)
	dir := t.TempDir()
	size := tool.Size(4096)
	if tool.Test == bw.LAT {
		size = tool.Size(64)
	}
	files := map[headerKey]string{}
	for _, pair := range pptest.BothWays {
		t.Run(pair.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sf, cf := filepath.Join(dir, pair.String()+"-server.json"), filepath.Join(dir, pair.String()+"-client.json")
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: size, Iters: 200,
				Extra:       append([]string{"--out_json"}, extra...),
				ServerExtra: []string{"--out_json_file", sf}, ClientExtra: []string{"--out_json_file=" + cf}}
			r.Do(ctx, t)
			if tool.Test == bw.LAT {
				r.CheckLat(t, r.Host)
			} else {
				r.Check(t, r.Host)
			}
			for _, side := range []struct {
				client bool
				tool   pptest.Side
				file   string
				out    string
			}{{false, pair.Server, sf, r.Server}, {true, pair.Client, cf, r.Client}} {
				b, err := os.ReadFile(side.file)
				if tool.Test == bw.LAT && tool.Verb.ReadsBack() && !side.client {
					if err == nil {
						t.Errorf("%s read_lat server wrote %s:\n%s", side.tool, side.file, b)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s (%s): %v\n%s", side.tool, pair, err, side.out)
				}
				checkJSONFigures(t, tool, string(b), side.out)
				files[headerKey{size, side.client, side.tool}] = jsonKeys(string(b))
			}
		})
	}
	for k, g := range files {
		if k.side != pptest.Go {
			continue
		}
		ck := k
		ck.side = pptest.C
		if c, ok := files[ck]; ok && g != c {
			t.Errorf("client %v: the Go tool's file differs from the C tool's\nGo:\n%s\nC:\n%s", k.client, g, c)
		}
	}
}

var jsonFigureRE = regexp.MustCompile(`(?m)^(BW_average|MsgRate|t_avg): ([^,\n]+),?$`)

// checkJSONFigures fails t unless the file's figures are those of the
// last result line of the tool's output (as printed, two or six
// decimals).
func checkJSONFigures(t *testing.T, tool Tool, file, out string) {
	t.Helper()
	got := map[string]string{}
	for _, m := range jsonFigureRE.FindAllStringSubmatch(file, -1) {
		got[m[1]] = m[2]
	}
	want := map[string]string{}
	if tool.Test == bw.LAT {
		if rs := bw.ParseLatReports(out); len(rs) > 0 {
			want["t_avg"] = fmt.Sprintf("%.2f", rs[len(rs)-1].Avg)
		} else if rs := bw.ParseLatDurReports(out); len(rs) > 0 {
			want["t_avg"] = fmt.Sprintf("%.2f", rs[len(rs)-1].Avg)
		}
	} else if rs := bw.ParseReports(out); len(rs) > 0 {
		last := rs[len(rs)-1]
		want["BW_average"], want["MsgRate"] = fmt.Sprintf("%.2f", last.Avg), fmt.Sprintf("%.6f", last.MsgRate)
	}
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("figures in the file %v, in the last line %v\nfile:\n%s\noutput:\n%s", got, want, file, out)
	}
}

// jsonKeys is a file with the figures of its results left out: its
// description, and the keys of its results.
func jsonKeys(file string) string {
	var b strings.Builder
	results := false
	for _, l := range strings.SplitAfter(file, "\n") {
		if strings.HasPrefix(l, "results:") {
			results = true
		}
		if k, _, ok := strings.Cut(l, ": "); ok && results && !strings.HasPrefix(l, "results:") {
			l = k + ": #\n"
		}
		b.WriteString(l)
	}
	return b.String()
}

// hugeFailure is what perftest prints, line by line, when --use_hugepages
// finds no huge pages (alloc_hugepage_region and its callers).
var hugeFailure = []string{"Failed to allocate hugepages. Please configure hugepages", "Failed to allocate hugepage region.",
	"failed to create mr", "Failed to create MR", " Couldn't create IB resources"}

// HugePages is the test of --use_hugepages (the buffer on huge pages):
// with none reserved, both sides of every pairing fail as perftest's
// do, with its lines; with pages reserved, Go against C both ways on
// rxe0, one QP and, with --mr_per_qp, four.
func HugePages(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	t.Run("none", func(t *testing.T) {
		testkit.SetHugePages(t, 0)
		failsLikePerftest(t, tool, []string{"--use_hugepages"}, "", hugeFailure)
	})
	t.Run("reserved", func(t *testing.T) {
		testkit.SetHugePages(t, 64)
		MatrixOn(t, tool, testkit.RxeDev, pptest.BothWays, []int{65536}, 200, "--use_hugepages")
		MatrixOn(t, tool, testkit.RxeDev, pptest.BothWays, []int{4096}, 200, "--use_hugepages", "-q", "4", "--mr_per_qp")
	})
}

// Mmap is the test of --mmap and --mmap-offset (the buffer is a file's
// pages, shared): Go against C both ways on rxe0, each side its own
// file. Both tools say where they mapped how much (the same size), and
// with write the 64 KiB the client sent from its file (from the offset;
// both tools first fill their buffer, the file, with their own bytes)
// are in the server's file, where the server's buffer keeps the peer's
// area.
// A file that does not exist fails both tools with perftest's lines.
func Mmap(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	dir := t.TempDir()
	const size, off = 65536, 8192
	pattern := make([]byte, 1<<20)
	for i := range pattern {
		pattern[i] = byte(i*13 + 7)
	}
	for _, pair := range pptest.BothWays {
		t.Run(pair.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sf, cf := filepath.Join(dir, pair.String()+"-server"), filepath.Join(dir, pair.String()+"-client")
			if err := os.WriteFile(sf, make([]byte, 1<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cf, pattern, 0o600); err != nil {
				t.Fatal(err)
			}
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: size, Iters: 100,
				ServerExtra: []string{"--mmap", sf}, ClientExtra: []string{"--mmap=" + cf, "--mmap-offset", fmt.Sprint(off)}}
			r.Do(ctx, t)
			r.Check(t, r.Host)
			for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
				if !regexp.MustCompile(`(?m)^allocated mmap buffer of size 131072 at 0x[0-9a-f]+$`).MatchString(out) {
					t.Errorf("%s (%s): no line for the mapping of 128 KiB\n%s", side, pair, out)
				}
			}
			if tool.Verb != bw.Write {
				return
			}
			got, err := os.ReadFile(sf)
			if err != nil {
				t.Fatal(err)
			}
			sent, err := os.ReadFile(cf)
			if err != nil {
				t.Fatal(err)
			}
			// The client's messages start at its mapping (the file at
			// off); the server's area for them is size past its own.
			if string(sent[:off]) != string(pattern[:off]) || string(sent[off:off+size]) == string(pattern[off:off+size]) {
				t.Errorf("%s: the client's file before its mapping changed, or the mapping was not filled", pair)
			}
			if want := sent[off : off+size]; string(got[size:2*size]) != string(want) {
				t.Errorf("%s: the server's file does not hold the client's message: its bytes %d.. are the client's from %d (-1: not the client's)",
					pair, size, strings.Index(string(sent), string(got[size:size+64])))
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		missing := filepath.Join(dir, "missing")
		failsLikePerftest(t, tool, []string{"--mmap", missing}, "Unable to open '"+missing+"': No such file or directory",
			[]string{"Couldn't allocate work buf.", "failed to create mr", "Failed to create MR", " Couldn't create IB resources"})
	})
}

// ODP is the test of --odp on rxe, which pages nothing on demand: both
// sides of every pairing fail as perftest's do, with its lines.
func ODP(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	failsLikePerftest(t, tool, []string{"--odp"}, "",
		[]string{" Send is not supported for RC transport.", "failed to create mr", "Failed to create MR", " Couldn't create IB resources"})
}

// failsLikePerftest runs tool with extra on both sides, Go against C both
// ways on rxe0, and fails t unless each side failed with perftest's
// lines: stdout's line (if any) and stderr's, in order (the Go tools'
// "  (...)" detail lines left out; C's stdout may come after its
// stderr).
func failsLikePerftest(t *testing.T, tool Tool, extra []string, stdoutLine string, stderrLines []string) {
	t.Helper()
	want := strings.Join(stderrLines, "\n")
	for _, pair := range pptest.BothWays {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 100, Extra: extra}
		err := r.try(ctx, t)
		cancel()
		if err == nil {
			t.Errorf("%s %s: ran", pair, strings.Join(extra, " "))
			continue
		}
		for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				if !strings.HasPrefix(l, "  (") && strings.TrimSpace(l) != "" {
					lines = append(lines, strings.TrimRight(l, "\r"))
				}
			}
			if !strings.Contains(strings.Join(lines, "\n"), want) || (stdoutLine != "" && !slices.Contains(lines, stdoutLine)) {
				t.Errorf("%s %s: output\n%s\nwant the lines\n%s\n%s", pair, side, out, stdoutLine, want)
			}
		}
	}
}

// NoVersions is the test of --dont_xchg_versions: perftest then checks
// the peer's version it never received, and both sides give up with its
// line, Go against C both ways.
func NoVersions(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	failsLikePerftest(t, tool, []string{"--dont_xchg_versions"}, "", []string{"Current implementation is not compatible with versions older than 5.70"})
}

// RateLimit is the test of perftest's rate limiter, Go against C both
// ways on rxe0. A HW limit (the default) cannot hold on a RoCE device:
// both tools fall back to the SW limiter and say so, or, with
// --rate_limit_type HW, give up as perftest does. The SW limiter holds
// the client to the rate: 400 messages of 64 KiB at 16 MiB/s in bursts
// of 8 average at most a tenth above it (the last of 50 bursts ends the
// run early by up to a gap), where rxe alone runs them faster.
func RateLimit(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	const limit = 16.0
	t.Run("fallback", func(t *testing.T) {
		matrix(t, tool, testkit.RxeDev, pptest.BothWays, []int{65536}, 200, []string{"--rate_limit", "10"}, func(t *testing.T, r *Run) bool {
			r.Check(t, r.Host)
			for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
				if !strings.Contains(out, "\x1b[31mThe QP failed to accept HW rate limit, providing SW rate limit \x1b[0m") {
					t.Errorf("%s (%s): no fallback line\n%s", side, r.Pair, out)
				}
			}
			return true
		})
	})
	t.Run("SW", func(t *testing.T) {
		matrix(t, tool, testkit.RxeDev, pptest.BothWays, []int{65536}, 400,
			[]string{"--rate_limit_type", "SW", "--rate_limit", "16", "--rate_units", "M", "--burst_size", "8"}, func(t *testing.T, r *Run) bool {
				_, c := r.Check(t, r.Host)
				if c.Avg > limit*1.1 || c.Avg <= 0 {
					t.Errorf("%s: %.2f MB/s under a limit of %.0f MB/s", r.Pair, c.Avg, limit)
				}
				t.Logf("%s: %.2f MB/s under a limit of %.0f MB/s", r.Pair, c.Avg, limit)
				return true
			})
	})
	t.Run("HW", func(t *testing.T) {
		failsLikePerftest(t, tool, []string{"--rate_limit", "10", "--rate_limit_type", "HW"}, "",
			[]string{"\x1b[31mThe QP failed to accept HW rate limit  \x1b[0m", " Unable to Connect the HCA's through the link"})
	})
}

// counterRE is one -W block: a line per counter ("\tNAME=VALUE"), then
// an empty line.
var counterRE = regexp.MustCompile(`(?m)^\thw_counters/sent_pkts=(\d+)\n\thw_counters/rcvd_pkts=(\d+)\n\n`)

// Counters is the test of -W (--report-counters), Go against C both ways
// on rxe0 with rxe's sent_pkts and rcvd_pkts: each result line is
// followed by one line per counter, named as given, and an empty line
// (ib_read_lat's server prints neither); each change covers the run's
// own packets (both sides use rxe0, so each side counts every message
// sent and received) and at most what sysfs counted from before the run
// to after it (other tests may use rxe0 too).
func Counters(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	size := tool.Size(4096)
	if tool.Test == bw.LAT {
		size = tool.Size(64)
	}
	const iters = 200
	read := func(name string) uint64 {
		b, err := os.ReadFile("/sys/class/infiniband/" + testkit.RxeDev + "/ports/1/hw_counters/" + name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, pair := range pptest.BothWays {
		t.Run(pair.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: size, Iters: iters,
				Extra: []string{"-W", "hw_counters/sent_pkts,hw_counters/rcvd_pkts"}}
			sent0, rcvd0 := read("sent_pkts"), read("rcvd_pkts")
			r.Do(ctx, t)
			sent1, rcvd1 := read("sent_pkts"), read("rcvd_pkts")
			if tool.Test == bw.LAT {
				r.CheckLat(t, r.Host)
			} else {
				r.Check(t, r.Host)
			}
			for _, side := range []struct {
				name string
				out  string
			}{{"server", r.Server}, {"client", r.Client}} {
				lines := len(bw.ParseReports(side.out)) + len(bw.ParseLatReports(side.out))
				blocks := counterRE.FindAllStringSubmatch(side.out, -1)
				if len(blocks) != lines || strings.Count(side.out, "hw_counters/") != 2*lines {
					t.Errorf("%s (%s): %d result lines, %d counter blocks\n%s", side.name, pair, lines, len(blocks), side.out)
					continue
				}
				if lines == 0 {
					if tool.Test == bw.LAT && tool.Verb.ReadsBack() && side.name == "server" {
						continue
					}
					t.Errorf("%s (%s): no result line\n%s", side.name, pair, side.out)
					continue
				}
				sent, _ := strconv.ParseUint(blocks[len(blocks)-1][1], 10, 64)
				rcvd, _ := strconv.ParseUint(blocks[len(blocks)-1][2], 10, 64)
				if sent < iters || sent > sent1-sent0 || rcvd < iters || rcvd > rcvd1-rcvd0 {
					t.Errorf("%s (%s): sent_pkts %d, rcvd_pkts %d; want at least %d each and at most sysfs's %d and %d\n%s",
						side.name, pair, sent, rcvd, iters, sent1-sent0, rcvd1-rcvd0, side.out)
				}
			}
		})
	}
}

// ForceLink is the test of --force-link, Go against C both ways on rxe0:
// forced to Ethernet (rxe's own) or to IB, the tools describe the link
// as forced and run (the harness gives -x, so the GRH that RoCE needs is
// there either way).
func ForceLink(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	size := tool.Size(4096)
	if tool.Test == bw.LAT {
		size = tool.Size(64)
	}
	for _, link := range []string{"Ethernet", "IB"} {
		t.Run(link, func(t *testing.T) {
			matrix(t, tool, testkit.RxeDev, pptest.BothWays, []int{size}, 100, []string{"--force-link=" + link}, func(t *testing.T, r *Run) bool {
				if tool.Test == bw.LAT {
					r.CheckLat(t, r.Host)
				} else {
					r.Check(t, r.Host)
				}
				for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
					if want := " Link type       : " + link + "\n"; !strings.Contains(out, want) {
						t.Errorf("%s (%s): no %q\n%s", side, r.Pair, want, out)
					}
				}
				return true
			})
		})
	}
}

// DLID is the test of --dlid, Go against C both ways on rxe0 (RC, and UD
// for send's latency tool, whose address handle takes it): each side
// names the LID given on its remote address line and in its address
// vectors, which a RoCE device ignores, so the run goes through.
func DLID(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	size := tool.Size(4096)
	if tool.Test == bw.LAT {
		size = tool.Size(64)
	}
	conns := [][]string{nil}
	if tool.Verb == bw.Send && tool.Test == bw.LAT {
		conns = append(conns, []string{"-c", "UD"})
	}
	for _, conn := range conns {
		matrix(t, tool, testkit.RxeDev, pptest.BothWays, []int{size}, 100, append([]string{"--dlid", "0x1234"}, conn...), func(t *testing.T, r *Run) bool {
			if tool.Test == bw.LAT {
				r.CheckLat(t, r.Host)
			} else {
				r.Check(t, r.Host)
			}
			for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
				if !strings.Contains(out, " remote address: LID 0x1234 ") || strings.Contains(out, " local address: LID 0x1234 ") {
					t.Errorf("%s (%s %v): want LID 0x1234 on the remote address line only\n%s", side, r.Pair, conn, out)
				}
			}
			return true
		})
	}
}
