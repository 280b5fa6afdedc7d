package testkit

import (
	"context"
	"debug/buildinfo"
	"errors"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// RequireTools skips outside the VM and checks the guest's programs: each
// of goTools must be this module's cmd/<name> (rxevm installs every cmd/
// tool in the guest's /usr/bin under its directory's name), each of
// cTools a program that is not Go (a cmd/ tool named like a C tool would
// replace it there, and every comparison would be Go against Go).
func RequireTools(tb testing.TB, goTools, cTools []string) {
	tb.Helper()
	RequireVM(tb)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		tb.Fatal("no build info in the test binary")
	}
	for _, name := range goTools {
		p, err := exec.LookPath(name)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		if info, err := buildinfo.ReadFile(p); err != nil || info.Path != bi.Main.Path+"/cmd/"+name {
			tb.Fatalf("%s is not this module's cmd/%s (%v)", p, name, err)
		}
	}
	for _, name := range cTools {
		p, err := exec.LookPath(name)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		if info, err := buildinfo.ReadFile(p); err == nil {
			tb.Fatalf("%s is a Go program (%s), not the C tool: a cmd/ tool of that name replaced it in the guest", p, info.Path)
		}
	}
}

// ExitStatus is a program's exit status from its Wait error: 0 for nil,
// the code of an *exec.ExitError, -1 otherwise (it did not exit).
func ExitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// StartCMServer starts name with args as a peer (StartPeer) and waits
// until an rdma_cm ID of this host listens on port; the test fails, with
// the peer's output, if the peer exits first or ctx ends.
func StartCMServer(ctx context.Context, tb testing.TB, port int, name string, args ...string) *Peer {
	tb.Helper()
	p := StartPeer(ctx, tb, name, args...)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := WaitCMListen(wctx, port); err != nil {
		tb.Fatalf("%s: %v\n%s", name, err, p.Output())
	}
	return p
}

// SameAsC runs the C tool's command line c and its Go port's g (program
// and arguments) to completion and fails the test, with both outputs,
// unless they print the same, after norm (which gives the Go tool's names
// the C tool's), and exit with the same status. what names the case in
// the test's log; it returns whether they agreed.
func SameAsC(ctx context.Context, tb testing.TB, what string, c, g []string, norm func(string) string) bool {
	tb.Helper()
	cOut, cErr := RunPeer(ctx, tb, c[0], c[1:]...)
	gOut, gErr := RunPeer(ctx, tb, g[0], g[1:]...)
	if norm(cOut) != norm(gOut) || ExitStatus(cErr) != ExitStatus(gErr) {
		tb.Errorf("%s: C %q (status %d):\n%s\nGo %q (status %d):\n%s", what, c, ExitStatus(cErr), norm(cOut), g, ExitStatus(gErr), norm(gOut))
		return false
	}
	tb.Logf("%s: status %d, %q", what, ExitStatus(cErr), norm(cOut))
	return true
}

// AsC is a Go port's output as its C tool's would read: no carriage
// returns (the pseudo-terminal's), and each Go name of pairs (Go name, C
// name, ...) given the C name in the usage line and as a line prefix.
func AsC(out string, pairs ...string) string {
	out = strings.ReplaceAll(out, "\r", "")
	for i := 0; i+1 < len(pairs); i += 2 {
		goName, cName := pairs[i], pairs[i+1]
		out = strings.ReplaceAll(out, "usage: "+goName, "usage: "+cName)
		out = strings.ReplaceAll(out, goName+":", cName+":")
	}
	return out
}

// cmListenRaceRE matches a client's report of the RDMA CM's reject with
// reason 8 (invalid service ID): ucmatose's and udaddy's "event:
// RDMA_CM_EVENT_REJECTED, error: 8", rping's "cma event
// RDMA_CM_EVENT_REJECTED, error 8", perftest's "Event:
// RDMA_CM_EVENT_REJECTED; error: 8.", and the Go ports' same lines.
var cmListenRaceRE = regexp.MustCompile(`RDMA_CM_EVENT_REJECTED[,;] error:? 8\b`)

// CMListenRace reports whether a client that connected to a server
// StartCMServer had started, and failed, met the server's listen not yet
// in place: rdma_listen marks the ID LISTEN (what WaitCMListen sees)
// before it registers the listen with the device's CM (cma.c: the state,
// then cma_ib_listen), and a request in between is rejected with reason
// 8, which rdma_connect reports as ECONNREFUSED (rdma_client's
// "rdma_connect: Connection refused"); a UD client's SIDR request gets
// RDMA_CM_EVENT_UNREACHABLE with -EINVAL. Only for runs that succeed when
// the listen is in place, with the server still running (it never saw
// the request): a test of a real refusal must not retry on it.
func CMListenRace(clientOut string) bool {
	return cmListenRaceRE.MatchString(clientOut) || cmSIDRRaceRE.MatchString(clientOut) ||
		strings.Contains(clientOut, "rdma_connect: Connection refused")
}

// cmSIDRRaceRE is a UD client's SIDR request that met no listener: the
// reply's "unsupported" status, RDMA_CM_EVENT_UNREACHABLE with -EINVAL
// (a timeout's is -110, not the race).
var cmSIDRRaceRE = regexp.MustCompile(`RDMA_CM_EVENT_UNREACHABLE, error:? -22\b`)

// RunCMPair starts a server (StartCMServer on port p, then name and args
// from server(p)) and runs a client (client(p)) to its end, then waits for
// the server; a client that met the server's listen not yet in place
// (CMListenRace) makes it stop that server and run both again on the next
// port, at most twice, with a log line. It returns the server and the
// client's output and end.
func RunCMPair(ctx context.Context, tb testing.TB, port func() int, server, client func(p int) []string) (srv *Peer, srvErr error, cliOut string, cliErr error) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		p := port()
		s := server(p)
		srv = StartCMServer(ctx, tb, p, s[0], s[1:]...)
		c := client(p)
		cliOut, cliErr = RunPeer(ctx, tb, c[0], c[1:]...)
		if cliErr != nil && attempt < 3 && ctx.Err() == nil && CMListenRace(cliOut) && srv.Running() {
			srv.Stop()
			srv.Wait()
			tb.Logf("%s came before %s's listen was in place; running both again:\n%s", c[0], s[0], cliOut)
			continue
		}
		return srv, srv.Wait(), cliOut, cliErr
	}
}
