package main

// The Go/C atomic rate comparison of docs/performance.md, in the
// bandwidth tables (8-byte atomics: MB/s is the message rate times 8).
// In the normal VM suite it runs one short round (a check of the
// harness); make perf runs it with more rounds on both kernels:
//
//	KERNEL=6.12 make vmtest VMPKGS=./cmd/atomicbw RUN=TestVMBandwidth \
//	    TESTFLAGS='-bw.rounds=5 -bw.iters=20000'

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
)

// TestVMBandwidth measures atomicbw and ib_atomic_bw (fetch-and-add, or
// what -bw.args says) in the same VM (-bw.dev, rxe0 by default): rounds
// of the four pairings in rotated order, 8 B with the first of
// -bw.iters; it logs each round, a table of medians with Go/C, and a
// BWPERF line for make perf.
func TestVMBandwidth(t *testing.T) {
	bwtest.Perf(t, tool)
}

// TestTwoHostBandwidth is the same comparison across the two hosts of
// make vmtest2 (the server on host A, the client on host B, over rxew).
func TestTwoHostBandwidth(t *testing.T) {
	bwtest.PerfTwoHosts(t, tool)
}
