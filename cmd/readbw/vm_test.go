package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/readbw): readbw against
// perftest's ib_read_bw in both directions (on rxe0; -a and Go against Go on rxelo).

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
)

var tool = bwtest.Tool{Verb: bw.Read, Go: "readbw"}

// TestVMAgainstC: Go server with C client and C server with Go client,
// 2 B (completions moderated every 100 messages) and 64 KiB (every
// message completes), on rxe0: both sides exit 0, print each
// other's QPN, PSN, rkey, address and GID, and a result line for the run.
func TestVMAgainstC(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 65536}, 100)
}

// TestVMGoGo: the Go tool against itself on rxelo, with other depths and
// moderation.
func TestVMGoGo(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{4096}, 300,
		"-t", "16", "-Q", "4")
}

// TestVMEvents: -e (the CQs report to a completion channel and the
// loops sleep on it), Go against C both ways on rxe0, moderated (2 B,
// a completion every 100 messages) and not (64 KiB: perftest keeps the
// moderation with events, so -Q 1 asks for it). perftest 6.06's client
// sleeps before every poll and, with a completion per message, waits for
// an event that never comes (docs/performance.md), so -Q 1 pairs a C
// server with the Go client only; then Go against Go with completions
// arriving faster than one poll reads them.
func TestVMEvents(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 65536}, 100, "-e")
	bwtest.MatrixOn(t, tool, "rxe0", []pptest.Pair{{Server: pptest.C, Client: pptest.Go}}, []int{65536}, 100, "-e", "-Q", "1")
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{1024}, 2000, "-e", "-Q", "1", "-X", "0")
}

// TestVMDuration: -D (run for a time and report the messages of the
// stretch between the margins), Go against C both ways on rxe0.
func TestVMDuration(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 100, "-D", "3", "-f", "1")
}

// TestVMPostList: -l (each post a chain of requests, a completion per
// list or per -Q of it), Go against C both ways on rxelo.
func TestVMPostList(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", pptest.BothWays, []int{64, 4096}, 400, "-l", "4")
	bwtest.MatrixOn(t, tool, "rxelo", pptest.BothWays, []int{1024}, 400, "-l", "8", "-Q", "4")
}

// TestVMAllSizes: -a (2 B to 8 MiB, a line per size on the client, the last one on the server),
// Go against C both ways on rxelo.
func TestVMAllSizes(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", pptest.BothWays, []int{65536}, 5, "-a")
}

// TestVMUnsupported: an unknown device fails in both tools with
// perftest's message.
func TestVMUnsupported(t *testing.T) {
	bwtest.SameFailure(t, tool, "IB device nosuchdev0 not found", "-d", "nosuchdev0")
}

// TestVMBadArgs: the client command lines of bwtest.BadArgs fail (or
// reach the connect to a server that is not there) exactly as perftest's
// do: same exit status, same lines.
func TestVMBadArgs(t *testing.T) {
	bwtest.SameAsC(t, tool, bwtest.BadArgs, nil)
}
