package testkit

import (
	"context"
	"debug/buildinfo"
	"errors"
	"os/exec"
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
