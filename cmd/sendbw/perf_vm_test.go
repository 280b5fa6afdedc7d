package main

// The Go/C bandwidth comparison of docs/performance.md. In the normal VM
// suite it runs one short round (a check of the harness); make perf runs
// it with more rounds and sizes on both kernels:
//
//	KERNEL=6.12 make vmtest VMPKGS=./cmd/sendbw RUN=TestVMBandwidth \
//	    TESTFLAGS='-bw.rounds=5 -bw.sizes=64,4096,65536 -bw.iters=20000,5000,2000'

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
)

// TestVMBandwidth measures sendbw and ib_send_bw in the same VM (-bw.dev,
// rxe0 by default): rounds of the four pairings per size in rotated
// order; it logs each round, a table of medians with Go/C, and a BWPERF
// line for make perf.
func TestVMBandwidth(t *testing.T) {
	bwtest.Perf(t, tool)
}

// TestTwoHostBandwidth is the same comparison across the two hosts of
// make vmtest2 (the server on host A, the client on host B, over rxew).
func TestTwoHostBandwidth(t *testing.T) {
	bwtest.PerfTwoHosts(t, tool)
}
