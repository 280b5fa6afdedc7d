package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/sendlat): sendlat
// against itself and against perftest's ib_send_lat in both directions.

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
)

var tool = bwtest.Tool{Verb: bw.Send, Go: "sendlat", Test: bw.LAT}

// TestVMAgainstC: Go server with C client and C server with Go client on
// rxe0, 2 B, 64 B and 16 KiB (above 8 KiB every send completes): both
// sides exit 0, print each other's addresses, perftest's test
// description and heading, and a line with sane times.
func TestVMAgainstC(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 64, 16384}, 500)
}

// TestVMGoGo: the Go tool against itself on both devices, with an odd
// rx depth below the iterations, inline messages and UC.
func TestVMGoGo(t *testing.T) {
	goGo := []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}
	bwtest.LatMatrixOn(t, tool, "", goGo, []int{2, 65536}, 300, "-r", "33")
	bwtest.LatMatrixOn(t, tool, "rxelo", goGo, []int{64}, 300, "-I", "64")
	bwtest.LatMatrixOn(t, tool, "rxelo", goGo, []int{64}, 300, "-c", "UC")
}

// TestVMUC: -c UC, Go against C both ways.
func TestVMUC(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64}, 300, "-c", "UC")
}

// TestVMAllSizes: -a (2 B to 8 MiB, a line per size on both sides), Go
// against C both ways on rxelo.
func TestVMAllSizes(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxelo", pptest.BothWays, []int{2}, 5, "-a")
}

// TestVMReportOptions: -U, -H and -C, and --output=latency, Go against C
// both ways.
func TestVMReportOptions(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2}, 100, "-U", "-H", "-C")
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2}, 100, "--output=latency")
}

// TestVMBadArgs: the client command lines of bwtest.LatBadArgs end as
// ib_send_lat's do, except those of what sendlat does not implement.
func TestVMBadArgs(t *testing.T) {
	notPorted := "sendlat refuses it by name (not ported yet)"
	bwtest.SameAsC(t, tool, bwtest.LatBadArgs, map[string]string{
		"-e": notPorted, "-X 0": notPorted, "-c UD": notPorted,
		"-D 0": notPorted, "-D 4 -f 2": notPorted, "-D 4 -a": notPorted, "-D 4": notPorted,
	})
}
