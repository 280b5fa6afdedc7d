package testkit

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The two-host topology (rxevm -hosts 2, make vmtest2): two guests joined
// by a virtual Ethernet wire (QEMU's socket netdev, an e1000 NIC in each),
// WireNetdev up with WireAddrA/24 on host A and WireAddrB/24 on host B, and
// an rxe device WireDev on it in each guest (GID 1 ::ffff:<address>). The
// test binaries run on host A; host B runs the agent (rxectl agent on
// WireAddrB:AgentPort), through which a test starts programs there
// (PeerHost). Both guests also have the single-host devices (rxe0, rxelo).
const (
	WireNetdev = "eth0"
	WireDev    = "rxew"
	WireAddrA  = "10.77.0.1"
	WireAddrB  = "10.77.0.2"
)

// TwoHostsSkipMessage is the reason tests needing two hosts give when they
// run anywhere else.
const TwoHostsSkipMessage = "needs the two-host rdma_rxe VMs: run `make vmtest2` (rxevm -hosts 2)"

// hostLetter is "a" or "b" on the two hosts (PUREVERBS_HOST, set by the
// guest's init in the two-host topology), "" elsewhere.
func hostLetter() string { return os.Getenv("PUREVERBS_HOST") }

// TwoHosts reports whether the process runs on one of the two hosts.
func TwoHosts() bool {
	l := hostLetter()
	return InVM() && (l == "a" || l == "b")
}

// RequireTwoHosts skips the test unless it runs in the two-host topology.
// The runner never runs TestTwoHost* tests anywhere else (rxevm adds
// -skip ^TestTwoHost to single-host runs), so inside a VM this skip fails
// the run. After CheckLeaksPerTest, the first RequireTwoHosts (or
// RequireVM) of a test also starts LeakCheck, as RequireVM's does.
func RequireTwoHosts(tb testing.TB) {
	tb.Helper()
	if !TwoHosts() {
		tb.Skip(TwoHostsSkipMessage)
	}
	leakCheckOnce(tb)
}

// Host is one of the two hosts. Programs started on it run on a
// pseudo-terminal in their own process group, as StartPeer's do.
type Host struct {
	Name  string // "A" or "B"
	Addr  string // its address on the wire, WireAddrA or WireAddrB
	agent string // the agent's address, "" for the host the test runs on
}

// GID returns the host's GID at index 1 of WireDev (IPv4-mapped, RoCE v2).
func (h *Host) GID() string { return "::ffff:" + h.Addr }

// Local reports whether h is the host the test runs on.
func (h *Host) Local() bool { return h.agent == "" }

func (h *Host) String() string { return "host " + h.Name + " (" + h.Addr + ")" }

func hostByLetter(l string, local bool) *Host {
	h := &Host{Name: "A", Addr: WireAddrA}
	if l == "b" {
		h = &Host{Name: "B", Addr: WireAddrB}
	}
	if !local {
		h.agent = net.JoinHostPort(h.Addr, strconv.Itoa(AgentPort))
	}
	return h
}

// ThisHost returns the host the test runs on (A for the test binaries the
// runner starts). The test is skipped outside the two-host topology.
func ThisHost(tb testing.TB) *Host {
	tb.Helper()
	RequireTwoHosts(tb)
	return hostByLetter(hostLetter(), true)
}

// PeerHost returns the other host, reached through its agent. The test is
// skipped outside the two-host topology.
func PeerHost(tb testing.TB) *Host {
	tb.Helper()
	RequireTwoHosts(tb)
	other := "b"
	if hostLetter() == "b" {
		other = "a"
	}
	return hostByLetter(other, false)
}

// Start starts name (looked up in PATH) with args on h, like StartPeer:
// the program is stopped at the end of the test if still running, killed
// when ctx is done, and its output logged if the test failed. A program on
// the peer host runs in /tmp.
func (h *Host) Start(ctx context.Context, tb testing.TB, name string, args ...string) *Peer {
	tb.Helper()
	return h.StartEnv(ctx, tb, nil, name, args...)
}

// StartEnv is Start with env ("K=V") added to the program's environment.
func (h *Host) StartEnv(ctx context.Context, tb testing.TB, env []string, name string, args ...string) *Peer {
	tb.Helper()
	RequireVM(tb)
	if h.Local() {
		return startLocal(ctx, tb, env, name, args)
	}
	return startRemotePeer(ctx, tb, h.agent, env, "", name, args)
}

// Run runs name with args on h to completion and returns its output and
// exit error.
func (h *Host) Run(ctx context.Context, tb testing.TB, name string, args ...string) (string, error) {
	tb.Helper()
	p := h.Start(ctx, tb, name, args...)
	err := p.Wait()
	return p.Output(), err
}

// PeerRoleEnv is the environment variable StartTest sets to the role.
const PeerRoleEnv = "PUREVERBS_PEER_ROLE"

// PeerRole returns the role StartTest gave this process ("" normally). A
// test started by StartTest checks it first and plays that role.
func PeerRole() string { return os.Getenv(PeerRoleEnv) }

// StartTest runs the running test binary on h (the same binary and package
// directory are on both hosts) with only tb's top-level test selected and
// PeerRoleEnv=role, plus env, in its environment: the test function sees
// PeerRole() == role and plays the other side of the test. The returned
// Peer's output is that process's -test.v output.
func (h *Host) StartTest(ctx context.Context, tb testing.TB, role string, env ...string) *Peer {
	tb.Helper()
	RequireVM(tb)
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	top, _, _ := strings.Cut(tb.Name(), "/")
	args := []string{"-test.run", "^" + regexp.QuoteMeta(top) + "$", "-test.v", "-test.count=1", "-test.timeout=10m"}
	env = append([]string{PeerRoleEnv + "=" + role}, env...)
	if h.Local() {
		return startLocal(ctx, tb, env, exe, args)
	}
	return startRemotePeer(ctx, tb, h.agent, env, dir, exe, args)
}

// Powering off host B. A test on host A may have the runner cut host B's
// power mid-test (Host.PowerOff), to see what the survivor on A gets from
// a peer that vanishes without a word. The protocol with the runner
// (rxevm, internal/testkit/cmd/rxevm/pair.go):
//
//   - the test announces it with a marker line on host A's console,
//     "<marker>POWEROFF B;", where <marker> is the runner's per-run tag,
//     which the guest's init passes to test binaries in MarkerEnv; only a
//     line from a test binary running on host A counts, and only once;
//   - on that line the runner kills host B's QEMU (SIGKILL): B stops at
//     once, as on a power loss, and its end of the wire goes silent
//     (host A's NIC keeps its carrier, as behind a switch);
//   - the runner then accepts that B never finishes (no agent END, no
//     DONE); any other death of B still fails the run;
//   - PowerOffFile, written before the announcement, tells host A's run
//     script not to stop B's agent at the end.
//
// Nothing after the power-off can use host B: a test that powers it off
// must run alone in its boot. Such tests are named TestTwoHostPowerOff*
// (PowerOffPrefix); the runner leaves them out of a -hosts 2 run unless
// -run selects one alone, and make vmtest2 runs them in their own boot.
const (
	MarkerEnv      = "PUREVERBS_MARKER"
	PowerOffFile   = "/run/pureverbs/peer-off"
	PowerOffPrefix = "TestTwoHostPowerOff"
)

// PowerOff has the runner power host h (host B, from a test on host A)
// off at once, as a power loss would: no process, kernel or NIC of h
// does anything more. It returns when the announcement is written; the
// runner kills h's QEMU as soon as it reads the line (milliseconds). The
// test must be named TestTwoHostPowerOff* (PowerOffPrefix), and it can
// observe the loss only as the survivor would: h stops answering.
// Programs started on h never report again: cancel their contexts
// (their connections are then given up after a grace period).
func (h *Host) PowerOff(tb testing.TB) {
	tb.Helper()
	RequireTwoHosts(tb)
	if h.Local() || h.Name != "B" {
		tb.Fatalf("PowerOff(%s): only host B can be powered off, by a test on host A", h)
	}
	if top, _, _ := strings.Cut(tb.Name(), "/"); !strings.HasPrefix(top, PowerOffPrefix) {
		tb.Fatalf("PowerOff: %s is not named %s*: the runner would run it with tests that need host B", top, PowerOffPrefix)
	}
	tag := os.Getenv(MarkerEnv)
	if tag == "" {
		tb.Fatalf("PowerOff: no %s in the environment: not started by rxevm's run script", MarkerEnv)
	}
	if err := os.MkdirAll(filepath.Dir(PowerOffFile), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(PowerOffFile, []byte(tb.Name()+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	if _, err := fmt.Fprintf(os.Stdout, "%sPOWEROFF B;\n", tag); err != nil {
		tb.Fatalf("PowerOff: announcing on the console: %v", err)
	}
}

// WaitListen waits until a TCP socket listens on port on h (a ping-pong
// server, before its client connects: probing it with a connection would
// use up its one accept), or ctx is done.
func (h *Host) WaitListen(ctx context.Context, tb testing.TB, port int) error {
	tb.Helper()
	if h.Local() {
		return WaitTCPListen(ctx, port)
	}
	out, err := h.Run(ctx, tb, "rxectl", "listening", strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("%s: %v: %s", h, err, strings.TrimSpace(out))
	}
	return nil
}

// WaitCMListen is WaitListen for an rdma_cm listener (WaitCMListen).
func (h *Host) WaitCMListen(ctx context.Context, tb testing.TB, port int) error {
	tb.Helper()
	if h.Local() {
		return WaitCMListen(ctx, port)
	}
	out, err := h.Run(ctx, tb, "rxectl", "listening", "-cm", strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("%s: %v: %s", h, err, strings.TrimSpace(out))
	}
	return nil
}

// WaitTCPListen waits until a TCP socket of this host listens on port (in
// /proc/net/tcp or tcp6), or ctx is done.
func WaitTCPListen(ctx context.Context, port int) error {
	want := fmt.Sprintf(":%04X", port)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			fh, err := os.Open(f)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				// sl local_address rem_address st ...; st 0A is LISTEN.
				fs := strings.Fields(sc.Text())
				if len(fs) > 3 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
					fh.Close()
					return nil
				}
			}
			fh.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nothing listens on TCP port %d: %w", port, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
