package testkit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startAgent serves an agent on a loopback port for the test and returns
// its address and a channel closed when Serve returned (its result in
// *served).
func startAgent(t *testing.T) (addr string, done <-chan struct{}, served *error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log Output
	a := &Agent{Log: &log}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	served = new(error)
	go func() {
		*served = a.Serve(ctx, l)
		close(ch)
	}()
	t.Cleanup(func() {
		cancel()
		<-ch
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})
	return l.Addr().String(), ch, served
}

// TestAgent runs programs through the agent as the two-host tests do:
// output and exit status come back, a non-zero status is a
// RemoteExitError, Stop interrupts, a program that cannot start says so,
// and ping and shutdown work.
func TestAgent(t *testing.T) {
	addr, done, served := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := WaitAgent(ctx, addr); err != nil {
		t.Fatal(err)
	}

	p := startRemotePeer(ctx, t, addr, []string{"PV_X=42"}, "/", "sh", []string{"-c", `echo "out $PV_X $(pwd)"; echo err >&2; exit 3`})
	err := p.Wait()
	var re *RemoteExitError
	if !errors.As(err, &re) || re.ExitCode() != 3 || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("exit: %v", err)
	}
	if out := p.Output(); !strings.Contains(out, "out 42 /\n") || !strings.Contains(out, "err\n") {
		t.Errorf("output %q", out)
	}

	// A C-style program sees a terminal (line-buffered stdio).
	p = startRemotePeer(ctx, t, addr, nil, "", "sh", []string{"-c", `[ -t 1 ] && echo tty; echo "dir $(pwd)"`})
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if out := p.Output(); !strings.Contains(out, "tty\n") || !strings.Contains(out, "dir "+os.TempDir()+"\n") {
		t.Errorf("output %q: want a terminal, run in %s", out, os.TempDir())
	}

	p = startRemotePeer(ctx, t, addr, nil, "", "sh", []string{"-c", "echo ready; exec sleep 100"})
	if err := p.WaitForOutput(ctx, "ready"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.Stop()
	if err := p.Wait(); !errors.As(err, &re) || re.Sig != syscall.SIGINT.String() || time.Since(start) > 3*time.Second {
		t.Errorf("stopped peer: %v after %s", err, time.Since(start))
	}

	p = startRemotePeer(ctx, t, addr, nil, "", "/nonexistent/prog", nil)
	if err := p.Wait(); !errors.As(err, &re) || re.Err == "" {
		t.Errorf("missing program: %v", err)
	}

	// Through RunRemote (rxectl remote).
	var out Output
	if err := RunRemote(ctx, addr, []string{"sh", "-c", "echo $PV_Y"}, []string{"PV_Y=y"}, &out); err != nil || out.String() != "y\n" {
		t.Errorf("RunRemote: %v, %q", err, out.String())
	}

	if err := StopAgent(ctx, addr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if *served != nil {
			t.Errorf("Serve after shutdown: %v", *served)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return after shutdown")
	}
}

// TestAgentKillsOrphans: when the client's connection goes away (the test
// on the other host died, or its context ended), the agent kills the
// program's whole process group.
func TestAgentKillsOrphans(t *testing.T) {
	addr, _, _ := startAgent(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pctx, pcancel := context.WithCancel(ctx)
	// A child in the background: the group, not just sh, must go.
	p := startRemotePeer(pctx, t, addr, nil, "", "sh", []string{"-c", "sleep 100 & echo $! > " + pidFile + "; echo ready; wait"})
	if err := p.WaitForOutput(ctx, "ready"); err != nil {
		t.Fatal(err)
	}
	pcancel()
	var re *RemoteExitError
	if err := p.Wait(); !errors.As(err, &re) || re.Sig != syscall.SIGKILL.String() {
		t.Errorf("after the context ended: %v", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	// Gone, or a zombie its new parent has not reaped yet.
	alive := func() bool {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return false
		}
		_, rest, _ := strings.Cut(string(st), ") ")
		return !strings.HasPrefix(rest, "Z")
	}
	for alive() {
		if ctx.Err() != nil {
			t.Fatalf("background child %s still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
