package testkit

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var extraRxeSeq atomic.Int32

// AddRxeDevice creates an rxe device called name in the VM, on a new dummy
// netdev of its own (returned; up, no addresses, so the device has only its
// link-local GID), through RDMA netlink (rxectl add), and waits until its
// port is ACTIVE. Both are deleted at the end of the test, the device
// first. The VM's own devices (RxeDev, LoopDev) and netdevs are not
// touched.
//
// RDMA device names are global, so tests that call it must not run in
// parallel with tests that list devices and expect only the VM's.
func AddRxeDevice(tb testing.TB, name string) (netdev string) {
	tb.Helper()
	RequireVM(tb)
	netdev = fmt.Sprintf("pvx%d", extraRxeSeq.Add(1))
	run := func(cleanup bool, name string, args ...string) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		switch {
		case err != nil && cleanup:
			tb.Errorf("cleanup: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		case err != nil:
			tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	tool, _ := ipTool()
	run(false, tool, "link", "add", netdev, "type", "dummy")
	tb.Cleanup(func() { run(true, tool, "link", "del", netdev) })
	run(false, tool, "link", "set", netdev, "up")
	run(false, "rxectl", "add", name, netdev)
	// Cleanups run last-in first-out: the device goes before its netdev.
	tb.Cleanup(func() { run(true, "rxectl", "del", name) })
	run(false, "rxectl", "wait", "-timeout", "30s", name)
	return netdev
}
