package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/rcpingpong): rcpingpong
// against rdma-core's ibv_rc_pingpong in both directions on rxe0 and
// rxelo.

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
)

var tool = pptest.Tool{Kind: pingpong.RC, Go: "rcpingpong", C: "ibv_rc_pingpong"}

func sizes(string) []int { return []int{1, 64, 4096, 65536} }

// TestVMAgainstC: Go server with C client and C server with Go client,
// 1 B to 64 KiB, on both devices, with -c; both sides exit 0, print each
// other's QPN, PSN and GID, and report size*iters*2 bytes.
func TestVMAgainstC(t *testing.T) {
	pptest.Matrix(t, tool, pptest.BothWays, sizes, 200, 1, "-c")
}

// TestVMGoGo: the Go tool against itself, and with a non-default MTU and
// receive depth.
func TestVMGoGo(t *testing.T) {
	pptest.Matrix(t, tool, []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}},
		func(string) []int { return []int{4096} }, 200, 1, "-m", "4096", "-r", "8")
}

// TestVMUnsupported: on rxe, -o, -O, -t and -j fail with the C tool's
// messages (rxe has no ODP, completion timestamps or device memory), and
// an unknown device is reported as the C tool reports it.
func TestVMUnsupported(t *testing.T) {
	for _, c := range []struct {
		flag, want string
	}{
		{"-o", "The device isn't ODP capable or does not support RC send and receive with ODP"},
		{"-O", "The device isn't ODP capable or does not support RC send and receive with ODP"},
		{"-t", "The device isn't completion timestamp capable"},
		{"-j", "Device doesn't support dm allocation"},
	} {
		pptest.SameFailure(t, tool, c.want, "-d", "rxe0", "-g", "1", c.flag)
	}
	pptest.SameFailure(t, tool, "IB device nosuchdev0 not found", "-d", "nosuchdev0")
}

// TestVMEvents: -e (sleep on CQ events through the completion channel) on
// both sides, Go against C both ways and Go against Go.
func TestVMEvents(t *testing.T) {
	pptest.Matrix(t, tool, append(pptest.BothWays, pptest.Pair{Server: pptest.Go, Client: pptest.Go}), func(string) []int { return []int{64, 65536} }, 200, 1, "-e")
}

// TestVMEventsWaitThread: -e with PUREVERBS_WAIT=thread (the Go side
// waits in an OS thread blocked in ppoll, uverbs.WaitThread), against C
// both ways and against itself.
func TestVMEventsWaitThread(t *testing.T) {
	t.Setenv(pingpong.WaitEnv, "thread")
	pptest.Matrix(t, tool, append(pptest.BothWays, pptest.Pair{Server: pptest.Go, Client: pptest.Go}), func(string) []int { return []int{64, 65536} }, 200, 1, "-e")
}

// TestVMBadArgs: the client command lines of pptest.BadArgs fail (or
// reach the connect to a server that is not there) exactly as the C
// tool's do: same exit, same lines.
func TestVMBadArgs(t *testing.T) {
	pptest.SameAsC(t, tool, pptest.BadArgs, nil)
}
