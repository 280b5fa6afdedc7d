package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/atomicbw): atomicbw
// against perftest's ib_atomic_bw in both directions.
//
// Go against C both ways is the proof that the atomics are real: the C
// server's QPs and memory accept remote atomics only (no remote read or
// write), so a Go client that posted anything else would fail with a
// remote access error; and a Go server that did not grant remote atomics
// would fail the C client's.

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = bwtest.Tool{Verb: bw.Atomic, Go: "atomicbw"}

var goGo = []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}

// TestVMAgainstC: Go server with C client and C server with Go client on
// rxe0, fetch-and-add (the default) and compare-and-swap: both sides
// exit 0, print each other's QPN and PSN (an atomic test prints neither
// OUT nor RKey nor VAddr), the same test description as perftest's, and
// a result line of 8-byte messages.
func TestVMAgainstC(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 1000)
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 1000, "-A", "CMP_AND_SWAP")
}

// TestVMGoGo: the Go tool against itself on rxelo with other depths,
// moderation, outstanding atomics and QPs, and a post list.
func TestVMGoGo(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", goGo, []int{8}, 1000, "-t", "16", "-Q", "4", "-o", "4", "-q", "2")
	bwtest.MatrixOn(t, tool, "rxelo", goGo, []int{8}, 400, "-l", "4", "-A", "CMP_AND_SWAP")
}

// TestVMModes: events (-e), a run of fixed duration (-D), both sides
// posting (-b) and rdma_cm connections (-R), Go against C both ways.
func TestVMModes(t *testing.T) {
	for _, extra := range [][]string{{"-e"}, {"-D", "3", "-f", "1"}, {"-b"}, {"-R"}} {
		bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 500, extra...)
	}
}

// TestVMWarmUp: --perform_warm_up, Go against C both ways with a
// completion per atomic (-Q 1: with perftest's moderation of 100 its
// warm-up waits for completions that never come), and Go against Go with
// the moderation.
func TestVMWarmUp(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{8}, 300, "--perform_warm_up", "-Q", "1")
	bwtest.MatrixOn(t, tool, "rxelo", goGo, []int{8}, 300, "--perform_warm_up")
}

// TestVMOutJSON: --out_json and --out_json_file, Go against C both ways
// (bwtest.OutJSON): the file names the atomic operation as perftest's.
func TestVMOutJSON(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.OutJSON(t, tool, "-A", "CMP_AND_SWAP")
}

// TestVMUnsupported: an unknown device fails in both tools alike
// (ib_atomic_bw returns 7, as ib_read_bw).
func TestVMUnsupported(t *testing.T) {
	bwtest.SameFailure(t, tool, "IB device nosuchdev0 not found", "-d", "nosuchdev0")
}

// TestVMBadArgs: the client command lines of bwtest.BadArgs and the
// atomic test's own (the fixed size, -a, -A's values, inline data, UC,
// on-demand paging, the software rate limiter) fail, or reach the
// connect to a server that is not there, exactly as ib_atomic_bw's do:
// same exit status, same lines.
func TestVMBadArgs(t *testing.T) {
	cases := append([][]string{
		{"-s", "8"}, {"-s", "16"}, {"-s", "8K"}, {"-a"}, {"-a", "--run_infinitely", "-D", "2"},
		{"-A", "CMP_AND_SWAP", "-s", "4"}, {"-A", "SWAP"}, {"-I", "8"}, {"-c", "UC"}, {"--odp"},
		{"--rate_limit", "5", "--rate_limit_type", "SW"}, {"-o", "20"}, {"-e", "-X", "1"},
	}, bwtest.BadArgs...)
	bwtest.SameAsC(t, tool, cases, nil)
}

// TestVMServerKilled: the server dies mid-run; the Go client fails as
// perftest's does, within a bound (bwtest.ServerKilled).
func TestVMServerKilled(t *testing.T) { bwtest.ServerKilled(t, tool) }

// TestTwoHostAtomic: both operations across the two hosts of make
// vmtest2 (server on A, client on B, over the wire's rxew), Go against
// Go and against C both ways (bwtest.TwoHosts).
func TestTwoHostAtomic(t *testing.T) {
	bwtest.TwoHosts(t, tool, []string{"-A", "FETCH_AND_ADD"}, []string{"-A", "CMP_AND_SWAP"})
}
