package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/ucpingpong): ucpingpong
// against rdma-core's ibv_uc_pingpong in both directions on rxe0 and
// rxelo.

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
)

var tool = pptest.Tool{Kind: pingpong.UC, Go: "ucpingpong", C: "ibv_uc_pingpong"}

// TestVMAgainstC: Go server with C client and C server with Go client,
// 1 B to 64 KiB, on both devices, with -c.
func TestVMAgainstC(t *testing.T) {
	pptest.Matrix(t, tool, pptest.BothWays, func(string) []int { return []int{1, 64, 4096, 65536} }, 200, 1, "-c")
}

func TestVMGoGo(t *testing.T) {
	pptest.Matrix(t, tool, []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}},
		func(string) []int { return []int{4096} }, 200, 1)
}

// TestVMEvents: -e on both sides, Go against C both ways and Go against Go.
func TestVMEvents(t *testing.T) {
	pptest.Matrix(t, tool, append(pptest.BothWays, pptest.Pair{Server: pptest.Go, Client: pptest.Go}), func(string) []int { return []int{4096} }, 200, 1, "-e")
}

// TestVMBadArgs: the client command lines of pptest.BadArgs fail (or
// reach the connect to a server that is not there) exactly as the C
// tool's do: same exit, same lines.
func TestVMBadArgs(t *testing.T) {
	pptest.SameAsC(t, tool, pptest.BadArgs, nil)
}
