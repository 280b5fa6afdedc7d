package testkit

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// ipTool finds iproute2's ip in the guest; busybox's applet (which may come
// first in PATH) lacks options such as nodad. It reports whether the tool
// found is iproute2.
var ipTool = sync.OnceValues(func() (string, bool) {
	for _, p := range []string{"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"} {
		out, err := exec.Command(p, "-V").CombinedOutput()
		if err == nil && strings.Contains(string(out), "iproute2") {
			return p, true
		}
	}
	return "ip", false
})

// ip runs ip (iproute2's when present) and fails the test on error.
func ip(tb testing.TB, args ...string) string {
	tb.Helper()
	RequireVM(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tool, _ := ipTool()
	out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// SetLink sets the netdev ifname administratively up or down. On rxe this
// raises IBV_EVENT_PORT_ACTIVE / IBV_EVENT_PORT_ERR on the device on top.
func SetLink(tb testing.TB, ifname string, up bool) {
	tb.Helper()
	state := "down"
	if up {
		state = "up"
	}
	ip(tb, "link", "set", "dev", ifname, state)
}

// AddAddr adds an IPv4 or IPv6 address ("10.99.0.2/24", "fd00::1/64") to
// ifname. rxe then adds a GID (IBV_EVENT_GID_CHANGE). IPv6 addresses are added
// with nodad so the GID appears without waiting for duplicate detection.
func AddAddr(tb testing.TB, ifname, cidr string) {
	tb.Helper()
	args := []string{"addr", "add", cidr, "dev", ifname}
	if _, iproute2 := ipTool(); iproute2 && strings.Contains(cidr, ":") {
		// busybox's ip has no nodad; the guest's netdevs (dummy, lo,
		// veth in tests) then still get the address at once on the
		// dummy (NOARP devices skip duplicate address detection).
		args = append(args, "nodad")
	}
	ip(tb, args...)
}

// DelAddr removes an address added with AddAddr.
func DelAddr(tb testing.TB, ifname, cidr string) {
	tb.Helper()
	ip(tb, "addr", "del", cidr, "dev", ifname)
}
