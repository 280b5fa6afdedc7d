package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/srqpingpong): srqpingpong
// against rdma-core's ibv_srq_pingpong in both directions on rxe0 and
// rxelo.

import (
	"slices"
	"testing"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
)

var tool = pptest.Tool{Kind: pingpong.SRQ, Go: "srqpingpong", C: "ibv_srq_pingpong"}

// TestVMAgainstC: Go server with C client and C server with Go client,
// 1 B to 64 KiB, on both devices, with the default 16 QPs and -c.
func TestVMAgainstC(t *testing.T) {
	pptest.Matrix(t, tool, pptest.BothWays, func(string) []int { return []int{1, 64, 4096, 65536} }, 400, 16, "-c")
}

// TestVMFewQPs: 3 QPs on a receive depth of 3 (one receive per QP, the
// least the tools accept).
func TestVMFewQPs(t *testing.T) {
	pptest.Matrix(t, tool, append(pptest.BothWays, pptest.Pair{Server: pptest.Go, Client: pptest.Go}),
		func(string) []int { return []int{4096} }, 100, 3, "-q", "3", "-r", "3")
}

// TestVMQPChecks: the srq checks fail as in the C tool, and so do depths
// past 2^31 that C adds to the QP count as ints into a valid CQ size:
// -r -1 asks for a CQ of 15 and fails at the SRQ (max_wr 2^32-1; make
// sweep, seed 101, found it). Where the sum is negative, C dies of
// SIGSEGV (sweep.ByDesign).
func TestVMQPChecks(t *testing.T) {
	pptest.SameFailure(t, tool, "rx_depth 4 is too small for 8 QPs -- must have at least one receive per QP.", "-q", "8", "-r", "4")
	pptest.SameFailure(t, tool, "num_qp 300 must be less than 255", "-q", "300", "-r", "1000")
	pptest.SameFailure(t, tool, "Couldn't create SRQ", "-r", "-1")
	pptest.SameFailure(t, tool, "Couldn't create SRQ", "-r", "4294967288")
}

// TestVMEvents: -e on both sides (one event may cover completions of
// several QPs), Go against C both ways and Go against Go.
func TestVMEvents(t *testing.T) {
	pptest.Matrix(t, tool, append(pptest.BothWays, pptest.Pair{Server: pptest.Go, Client: pptest.Go}), func(string) []int { return []int{4096} }, 400, 16, "-e")
}

// TestVMBadArgs: the client command lines of pptest.BadArgs fail (or
// reach the connect to a server that is not there) exactly as the C
// tool's do: same exit, same lines.
func TestVMBadArgs(t *testing.T) {
	// No QPs: ibv_srq_pingpong asks for the GID once per QP, so a GID
	// index past the table is never read.
	pptest.SameAsC(t, tool, append(slices.Clone(pptest.BadArgs), []string{"-q", "0", "-g", "5000"}), nil)
}
