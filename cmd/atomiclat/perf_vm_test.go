package main

// The Go/C latency comparison of docs/performance.md ("Latency tools:
// Go against perftest"). In the normal VM suite it runs one short round
// (a check of the harness); make perf runs it with more rounds and sizes
// on both kernels:
//
//	KERNEL=6.12 make vmtest VMPKGS=./cmd/atomiclat RUN=TestVMLatency \
//	    TESTFLAGS='-bw.rounds=5 -bw.sizes=2,64,4096 -bw.iters=3000,3000,2000'

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
)

// TestVMLatency measures atomiclat and ib_atomic_lat in the same VM
// (-bw.dev, rxe0 by default), polling and with -e: rounds of the four
// pairings in rotated order, 8-byte atomics (fetch-and-add, or what
// -bw.args says), with the first of -bw.iters; it logs each round, a table
// of the client's median t_typical with Go/C of the typical and the
// average, and a LATPERF line for make perf.
func TestVMLatency(t *testing.T) {
	bwtest.LatPerf(t, tool)
}
