package bwtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	size := 4096
	if tool.Test == bw.LAT {
		size = 64
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
				if tool.Test == bw.LAT && tool.Verb == bw.Read && !side.client {
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
		for _, pair := range pptest.BothWays {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 100, Extra: []string{"--use_hugepages"}}
			err := r.try(ctx, t)
			cancel()
			if err == nil {
				t.Errorf("%s: ran without huge pages", pair)
				continue
			}
			for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
				var lines []string
				for _, l := range strings.Split(out, "\n") {
					if !strings.HasPrefix(l, "  (") && strings.TrimSpace(l) != "" {
						lines = append(lines, strings.TrimRight(l, "\r"))
					}
				}
				if !strings.Contains(strings.Join(lines, "\n"), strings.Join(hugeFailure, "\n")) {
					t.Errorf("%s %s: output\n%s\nwant the lines\n%s", pair, side, out, strings.Join(hugeFailure, "\n"))
				}
			}
		}
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
		for _, pair := range pptest.BothWays {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 100, Extra: []string{"--mmap", missing}}
			err := r.try(ctx, t)
			cancel()
			if err == nil {
				t.Errorf("%s: ran on a missing file", pair)
				continue
			}
			// (stdout's line, then stderr's: C's stdout may come last.)
			open := "Unable to open '" + missing + "': No such file or directory"
			want := "Couldn't allocate work buf.\nfailed to create mr\nFailed to create MR\n Couldn't create IB resources"
			for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
				var lines []string
				for _, l := range strings.Split(out, "\n") {
					if !strings.HasPrefix(l, "  (") && strings.TrimSpace(l) != "" {
						lines = append(lines, strings.TrimRight(l, "\r"))
					}
				}
				if !strings.Contains(strings.Join(lines, "\n"), want) || !slices.Contains(lines, open) {
					t.Errorf("%s %s: output\n%s\nwant the lines\n%s", pair, side, out, want)
				}
			}
		}
	})
}
