package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/readlat): readlat
// against itself and against perftest's ib_read_lat in both directions.

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = bwtest.Tool{Verb: bw.Read, Go: "readlat", Test: bw.LAT}

// TestVMAgainstC: Go server with C client and C server with Go client on
// rxe0, 2 B, 64 B and 16 KiB (more than one packet each way at the
// MTU of 1024): both sides exit 0 and print each other's addresses and
// perftest's test description; the client prints the heading and a line
// with sane times, the server neither.
func TestVMAgainstC(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 64, 16384}, 500)
}

// TestVMGoGo: the Go tool against itself on both devices, and with more
// outstanding reads than the default.
func TestVMGoGo(t *testing.T) {
	goGo := []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}
	bwtest.LatMatrixOn(t, tool, "", goGo, []int{2, 65536}, 300)
	bwtest.LatMatrixOn(t, tool, "rxelo", goGo, []int{64}, 300, "-o", "4")
}

// TestVMEvents: -e (the client sleeps on its completion channel for each
// read), Go against C both ways, and on rxelo with a completion vector.
func TestVMEvents(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 4096}, 300, "-e")
	bwtest.LatMatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{64}, 300, "-e", "-X", "0")
}

// TestVMAllSizes: -a (2 B to 8 MiB, a line per size on the client), Go
// against C on rxelo, one way per kernel (bwtest.AllSizes).
func TestVMAllSizes(t *testing.T) { bwtest.AllSizes(t, tool) }

// TestVMReportOptions: -U, -H and -C print the samples around the table;
// --output=latency the average alone; --latency_gap=200 keeps every
// sample at least the gap (halved for a round trip); Go against C both
// ways.
func TestVMReportOptions(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2}, 100, "-U", "-H", "-C")
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2}, 100, "--output=latency")
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2}, 100, "--latency_gap=200")
}

// TestVMDuration: -D 4 (a second of margin each end), Go against C both
// ways: one line of the measured stretch on the client.
func TestVMDuration(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64}, 1000, "-D", "4")
}

// TestVMBadArgs: the client command lines of bwtest.LatBadArgs, and the
// read verb's own (outstanding reads, events with -D, multicast), end
// exactly as ib_read_lat's do: same exit status, same lines.
func TestVMBadArgs(t *testing.T) {
	cases := append([][]string{
		{"-o", "0"}, {"-o", "17"}, {"-o", "x"}, {"-D", "4", "-e"}, {"-e", "-X", "1"}, {"-I", "64"}, {"-g"},
	}, bwtest.LatBadArgs...)
	bwtest.SameAsC(t, tool, cases, nil)
}

// TestTwoHostLatency: across the two hosts of make vmtest2 (server on A,
// client on B, over rxew), Go against C both ways and Go against Go, a
// small message and one of several packets.
func TestTwoHostLatency(t *testing.T) {
	bwtest.LatTwoHosts(t, tool, []int{2, 4096}, 300)
}

// TestVMOutJSON: --out_json and --out_json_file, Go against C both ways (bwtest.OutJSON).
func TestVMOutJSON(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.OutJSON(t, tool)
}

// TestVMCounters: -W (--report-counters) with rxe's packet counters, Go against C both ways (bwtest.Counters).
func TestVMCounters(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Counters(t, tool)
}

// TestVMRDMACM: -R and -z, Go against C both ways (bwtest.LatRDMACM).
func TestVMRDMACM(t *testing.T) { bwtest.LatRDMACM(t, tool) }

// TestVMServerKilled: the server dies mid-run; the Go client fails as
// perftest's does, within a bound (bwtest.ServerKilled).
func TestVMServerKilled(t *testing.T) { bwtest.ServerKilled(t, tool) }

// TestVMPeerKilled: the peer (perftest's) dies mid-run, over RC and with
// -e on the Go side: the Go client, whose read rxe retries for ever,
// and the Go server exit with an error where ib_read_lat's client would
// wait for ever (bwtest.PeerKilled).
func TestVMPeerKilled(t *testing.T) {
	bwtest.PeerKilled(t, tool, bwtest.KillMode{}, bwtest.KillMode{Go: []string{"-e"}}, bwtest.KillMode{Both: []string{"-R"}})
}
