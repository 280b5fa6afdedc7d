package testkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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
// ibv_rc_pingpong, ibv_asyncwatch or ib_write_bw) running beside the test.
// Its stdout and stderr are captured together.
type Peer struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // valid after done

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
	p := &Peer{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, name, args...)
	p.cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+GuestLibPath)
	p.cmd.WaitDelay = stopGrace
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	master, slave, err := openPTY()
	if err != nil {
		// No pty: fall back to a pipe (C tools then block-buffer stdout).
		tb.Logf("peer %s: no pty (%v); using a pipe", name, err)
		p.cmd.Stdout = &p.out
		p.cmd.Stderr = &p.out
	} else {
		p.cmd.Stdout = slave
		p.cmd.Stderr = slave
	}
	startErr := p.cmd.Start()
	if slave != nil {
		slave.Close()
	}
	if startErr != nil {
		if master != nil {
			master.Close()
		}
		tb.Fatalf("start peer %s: %v", name, startErr)
	}
	copied := make(chan struct{})
	if master != nil {
		go func() {
			defer close(copied)
			// Ends with EIO once every holder of the slave side is gone.
			io.Copy(&p.out, master)
		}()
	} else {
		close(copied)
	}
	go func() {
		p.err = p.cmd.Wait()
		if master != nil {
			// Drain what the peer wrote; bounded in case a grandchild
			// still holds the terminal.
			t := time.NewTimer(stopGrace)
			select {
			case <-copied:
			case <-t.C:
			}
			t.Stop()
			master.Close()
			<-copied
		}
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("peer %s %s output:\n%s", name, strings.Join(args, " "), p.Output())
		}
	})
	return p
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
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Output returns everything the peer has written so far (stdout and stderr
// interleaved). It is safe to call while the peer runs.
func (p *Peer) Output() string { return p.out.String() }

// ErrPeerExited is returned by WaitForOutput when the peer exited without
// printing the awaited text.
var ErrPeerExited = errors.New("peer exited")

// WaitForOutput blocks until the peer's output contains substr, ctx is done
// or the peer exits without printing it.
func (p *Peer) WaitForOutput(ctx context.Context, substr string) error {
	switch err := p.out.WaitFor(ctx, substr, p.done); {
	case err == nil:
		return nil
	case errors.Is(err, errOutputEnded):
		return fmt.Errorf("waiting for %q from %s: %w (%v); output:\n%s", substr, p.name, ErrPeerExited, p.err, p.Output())
	default:
		return fmt.Errorf("waiting for %q from %s: %w; output so far:\n%s", substr, p.name, err, p.Output())
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
