package testkit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// GuestLibPath is the LD_LIBRARY_PATH peers get: where the guest's
// rdma-core, libnl and glibc live.
const GuestLibPath = "/usr/lib/x86_64-linux-gnu"

// stopGrace is how long Stop waits after SIGINT before it kills the peer.
const stopGrace = 5 * time.Second

// Peer is a guest program (typically an rdma-core C tool such as
// ibv_rc_pingpong, ibv_asyncwatch or ib_write_bw) running beside the test,
// or on the other host of the two-host topology (Host.Start). Its stdout
// and stderr are captured together.
type Peer struct {
	name   string
	where  string // "" here; else the agent's address
	args   []string
	signal func(syscall.Signal) // to the peer's process group
	abort  func()               // remote: drop the connection to the agent
	done   chan struct{}        // closed when the process has exited
	err    error                // valid after done

	out Output
}

// StartPeer starts name (looked up in PATH) with args in the guest. The test
// is skipped on the host and fails if the program cannot start. The peer is
// stopped at the end of the test if still running, and its output logged if
// the test failed. ctx bounds the peer's life: when it is done the peer is
// killed.
func StartPeer(ctx context.Context, tb testing.TB, name string, args ...string) *Peer {
	tb.Helper()
	RequireVM(tb)
	return startLocal(ctx, tb, nil, name, args)
}

// StartPeerEnv is StartPeer with env ("K=V") added to the program's
// environment.
func StartPeerEnv(ctx context.Context, tb testing.TB, env []string, name string, args ...string) *Peer {
	tb.Helper()
	RequireVM(tb)
	return startLocal(ctx, tb, env, name, args)
}

// startLocal starts a peer on this host, in the test's directory, with env
// added to the environment.
func startLocal(ctx context.Context, tb testing.TB, env []string, name string, args []string) *Peer {
	tb.Helper()
	p := &Peer{name: name, args: args, done: make(chan struct{})}
	pr, err := startProc(name, args, env, "", &p.out)
	if err != nil {
		tb.Fatalf("start peer %s: %v", name, err)
	}
	p.signal = pr.signal
	go func() {
		select {
		case <-ctx.Done():
			pr.signal(syscall.SIGKILL)
		case <-pr.done:
		}
	}()
	go func() {
		<-pr.done
		p.err = pr.err
		close(p.done)
	}()
	p.cleanup(tb)
	return p
}

// startRemotePeer has the agent at addr start a peer.
func startRemotePeer(ctx context.Context, tb testing.TB, addr string, env []string, dir, name string, args []string) *Peer {
	tb.Helper()
	p := &Peer{name: name, where: addr, args: args, done: make(chan struct{})}
	r, err := startRemote(ctx, addr, append([]string{name}, args...), env, dir, &p.out)
	if err != nil {
		tb.Fatalf("start peer %s on %s: %v", name, addr, err)
	}
	p.signal = r.signal
	p.abort = func() { r.conn.Close() }
	go func() {
		<-r.done
		p.err = r.err
		close(p.done)
	}()
	p.cleanup(tb)
	return p
}

// cleanup stops the peer at the end of the test and logs its output if
// the test failed.
func (p *Peer) cleanup(tb testing.TB) {
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			where := ""
			if p.where != "" {
				where = " (on " + p.where + ")"
			}
			tb.Logf("peer %s %s%s output:\n%s", p.name, strings.Join(p.args, " "), where, p.Output())
		}
	})
}

// Wait waits for the peer to exit and returns its exit error (nil for
// status 0).
func (p *Peer) Wait() error {
	<-p.done
	if p.err != nil {
		return fmt.Errorf("peer %s: %w", p.name, p.err)
	}
	return nil
}

// Done is closed when the peer has exited.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Stop interrupts the peer (SIGINT to its process group), and kills it if it
// has not exited after a grace period. It returns once the peer is gone.
func (p *Peer) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.signal(syscall.SIGINT)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.signal(syscall.SIGKILL)
		if p.abort == nil {
			<-p.done
			return
		}
		// A peer host that died does not answer: give up on it.
		t.Reset(stopGrace)
		select {
		case <-p.done:
		case <-t.C:
			p.abort()
			<-p.done
		}
	}
}

// Kill kills the peer at once (SIGKILL to its process group), as a crash
// would; Wait then reports it.
func (p *Peer) Kill() { p.signal(syscall.SIGKILL) }

// Output returns everything the peer has written so far (stdout and stderr
// interleaved). It is safe to call while the peer runs.
func (p *Peer) Output() string { return p.out.String() }

// ErrPeerExited is returned by WaitForOutput when the peer exited without
// printing the awaited text.
var ErrPeerExited = errors.New("peer exited")

// WaitForOutput blocks until the peer's output contains substr, ctx is done
// or the peer exits without printing it.
func (p *Peer) WaitForOutput(ctx context.Context, substr string) error {
	return p.WaitUntil(ctx, strconv.Quote(substr), func(s string) bool { return strings.Contains(s, substr) })
}

// WaitUntil blocks until cond holds for the peer's output (what holds
// is described by what, for the error), ctx is done or the peer exits
// first.
func (p *Peer) WaitUntil(ctx context.Context, what string, cond func(string) bool) error {
	switch err := p.out.WaitUntil(ctx, cond, p.done); {
	case err == nil:
		return nil
	case errors.Is(err, errOutputEnded):
		return fmt.Errorf("waiting for %s from %s: %w (%v); output:\n%s", what, p.name, ErrPeerExited, p.err, p.Output())
	default:
		return fmt.Errorf("waiting for %s from %s: %w; output so far:\n%s", what, p.name, err, p.Output())
	}
}

// RunPeer runs name with args to completion and returns its combined output
// and exit error.
func RunPeer(ctx context.Context, tb testing.TB, name string, args ...string) (string, error) {
	tb.Helper()
	p := StartPeer(ctx, tb, name, args...)
	err := p.Wait()
	return p.Output(), err
}
