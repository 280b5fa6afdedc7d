package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/atomiclat): atomiclat
// against itself and against perftest's ib_atomic_lat in both
// directions. As for atomicbw, Go against C both ways proves that the
// requests are atomics: each side's QP and memory accept nothing else.

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = bwtest.Tool{Verb: bw.Atomic, Go: "atomiclat", Test: bw.LAT}

// TestVMAgainstC: Go server with C client and C server with Go client on
// rxe0, fetch-and-add and compare-and-swap, polling and with -e: both
// sides exit 0 and print each other's addresses and perftest's test
// description; the client prints the heading and a line with sane
// times, the server neither.
func TestVMAgainstC(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 500)
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 300, "-A", "CMP_AND_SWAP", "-e")
}

// TestVMModes: the Go tool against itself on rxelo with more outstanding
// atomics than the default and a completion vector; -D, the report
// options (-U -H -C) and rdma_cm (-R), Go against C both ways.
func TestVMModes(t *testing.T) {
	bwtest.LatMatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{8}, 300, "-o", "4", "-e", "-X", "0")
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 1000, "-D", "4")
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 100, "-U", "-H", "-C")
	bwtest.LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 300, "-R")
}

// TestVMOutJSON: --out_json, Go against C both ways (bwtest.OutJSON; the
// server writes no file).
func TestVMOutJSON(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.OutJSON(t, tool)
}

// TestVMBadArgs: the client command lines of bwtest.LatBadArgs and the
// atomic test's own end exactly as ib_atomic_lat's do: same exit status,
// same lines.
func TestVMBadArgs(t *testing.T) {
	cases := append([][]string{
		{"-s", "8"}, {"-s", "2"}, {"-a"}, {"-A", "FETCH_AND_ADD"}, {"-A", "x"}, {"-I", "8"}, {"--odp"},
		{"-o", "0"}, {"-o", "17"}, {"-D", "4", "-e"}, {"-e", "-X", "1"},
	}, bwtest.LatBadArgs...)
	bwtest.SameAsC(t, tool, cases, nil)
}

// TestVMServerKilled: the server dies mid-run; the Go client fails as
// perftest's does, within a bound (bwtest.ServerKilled).
func TestVMServerKilled(t *testing.T) { bwtest.ServerKilled(t, tool) }

// TestTwoHostLatency: across the two hosts of make vmtest2 (server on A,
// client on B, over the wire's rxew), Go against Go and against C both
// ways (bwtest.LatTwoHosts).
func TestTwoHostLatency(t *testing.T) {
	bwtest.LatTwoHosts(t, tool, []int{8}, 300)
}

// TestVMPeerKilled: the peer (perftest's) dies mid-run: the Go client,
// whose atomic rxe retries for ever, and the Go server exit with an
// error where ib_atomic_lat's client would wait for ever
// (bwtest.PeerKilled).
func TestVMPeerKilled(t *testing.T) { bwtest.PeerKilled(t, tool) }
