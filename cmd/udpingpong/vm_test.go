package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/udpingpong): udpingpong
// against rdma-core's ibv_ud_pingpong in both directions on rxe0 and
// rxelo, up to each port's active MTU.

import (
	"fmt"
	"testing"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = pptest.Tool{Kind: pingpong.UD, Go: "udpingpong", C: "ibv_ud_pingpong"}

// sizes are 1 B, 64 B and the port's active MTU (a UD message is one
// packet): 1024 on rxe0 (d0's MTU is 1500), 4096 on rxelo.
func sizes(t *testing.T) func(string) []int {
	return func(dev string) []int {
		mtu := pptest.ActiveMTU(t, dev)
		t.Logf("%s: active MTU %d", dev, mtu)
		return []int{1, 64, mtu}
	}
}

// TestVMAgainstC: Go server with C client and C server with Go client on
// both devices, with -c.
func TestVMAgainstC(t *testing.T) {
	testkit.RequireVM(t)
	pptest.Matrix(t, tool, pptest.BothWays, sizes(t), 200, 1, "-c")
}

func TestVMGoGo(t *testing.T) {
	testkit.RequireVM(t)
	pptest.Matrix(t, tool, []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, sizes(t), 200, 1)
}

// TestVMTooLarge: one byte more than the active MTU fails in both tools
// with the C tool's message.
func TestVMTooLarge(t *testing.T) {
	testkit.RequireVM(t)
	for _, dev := range pptest.Devices {
		mtu := pptest.ActiveMTU(t, dev.Name)
		pptest.SameFailure(t, tool, fmt.Sprintf("Requested size larger than port MTU (%d)", mtu),
			"-d", dev.Name, "-g", "1", "-s", fmt.Sprint(mtu+1))
	}
}

// TestVMEvents: -e on both sides, Go against C both ways and Go against Go.
func TestVMEvents(t *testing.T) {
	testkit.RequireVM(t)
	pptest.Matrix(t, tool, append(pptest.BothWays, pptest.Pair{Server: pptest.Go, Client: pptest.Go}), func(string) []int { return []int{64} }, 200, 1, "-e")
}

// TestVMBadArgs: the client command lines of pptest.BadArgs fail (or
// reach the connect to a server that is not there) exactly as the C
// tool's do: same exit, same lines.
func TestVMBadArgs(t *testing.T) {
	pptest.SameAsC(t, tool, pptest.BadArgs, nil)
}
