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

// Addresses NetnsPair gives the veth ends in namespaces a and b.
const (
	NetnsAddrA = "10.100.0.1"
	NetnsAddrB = "10.100.0.2"
)

// NetnsVeth is the name of the veth end inside each namespace.
const NetnsVeth = "veth0"

var netnsSeq atomic.Int32

// NetnsDev returns the name of the rxe device NetnsPair created in ns.
// RDMA devices live in one global namespace (the kernel's default "shared"
// rdma netns mode), so the name is unique per namespace.
func NetnsDev(ns string) string { return "rxe_" + ns }

// NetnsPair creates two network namespaces a and b joined by a veth pair
// (NetnsVeth in each; NetnsAddrA/24 in a, NetnsAddrB/24 in b) and an rxe
// device NetnsDev(a), NetnsDev(b) on each veth end, created from inside the
// namespace through RDMA netlink. Everything is removed at the end of the
// test. Run a command in a namespace with `ip netns exec NS CMD...`
// (StartPeer(ctx, tb, "ip", "netns", "exec", a, "ibv_rc_pingpong", ...)).
//
// On Debian's 6.1 and 6.12 kernels rxe opens its UDP port (4791) in the
// initial namespace only, so RoCE traffic between the two namespaces is not
// expected to work; the devices and GIDs do appear (see docs/testing.md).
func NetnsPair(tb testing.TB) (a, b string) {
	tb.Helper()
	RequireVM(tb)
	n := netnsSeq.Add(1)
	a, b = fmt.Sprintf("pv%da", n), fmt.Sprintf("pv%db", n)
	run := func(name string, args ...string) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	cleanup := func(name string, args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, name, args...).CombinedOutput(); err != nil {
			tb.Logf("cleanup: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	for _, ns := range []string{a, b} {
		run("ip", "netns", "add", ns)
		tb.Cleanup(func() { cleanup("ip", "netns", "del", ns) })
	}
	run("ip", "link", "add", "pvtmp"+a, "netns", a, "type", "veth", "peer", "name", "pvtmp"+b, "netns", b)
	for ns, addr := range map[string]string{a: NetnsAddrA, b: NetnsAddrB} {
		run("ip", "-n", ns, "link", "set", "pvtmp"+ns, "name", NetnsVeth)
		run("ip", "-n", ns, "addr", "add", addr+"/24", "dev", NetnsVeth)
		run("ip", "-n", ns, "link", "set", "lo", "up")
		run("ip", "-n", ns, "link", "set", NetnsVeth, "up")
	}
	for _, ns := range []string{a, b} {
		dev := NetnsDev(ns)
		run("ip", "netns", "exec", ns, "rxectl", "add", dev, NetnsVeth)
		// Cleanups run last-in first-out: the device goes before the netns.
		tb.Cleanup(func() { cleanup("ip", "netns", "exec", ns, "rxectl", "del", dev) })
	}
	run("rxectl", "wait", "-timeout", "30s", NetnsDev(a), NetnsDev(b))
	return a, b
}
