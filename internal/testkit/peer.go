package testkit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	pid    int    // here: the process's id; 0 on another host
	args   []string
	signal func(syscall.Signal) // to the peer's process group
	abort  func()               // remote: drop the connection to the agent
	done   chan struct{}        // closed when the process has exited
	err    error                // valid after done
	start  time.Time
	exited time.Time // valid after done
	// stopped is set when the test's end found the peer still running
	// (cleanup stopped it); a peer that exited by itself has it false.
	stopped bool

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
	p := &Peer{name: name, args: args, done: make(chan struct{}), start: time.Now()}
	pr, err := startProc(name, args, env, "", &p.out)
	if err != nil {
		tb.Fatalf("start peer %s: %v", name, err)
	}
	p.signal, p.pid = pr.signal, pr.pid
	go func() {
		select {
		case <-ctx.Done():
			pr.signal(syscall.SIGKILL)
		case <-pr.done:
		}
	}()
	go func() {
		<-pr.done
		p.err, p.exited = pr.err, time.Now()
		close(p.done)
	}()
	p.cleanup(tb)
	return p
}

// startRemotePeer has the agent at addr start a peer.
func startRemotePeer(ctx context.Context, tb testing.TB, addr string, env []string, dir, name string, args []string) *Peer {
	tb.Helper()
	p := &Peer{name: name, where: addr, args: args, done: make(chan struct{}), start: time.Now()}
	r, err := startRemote(ctx, addr, append([]string{name}, args...), env, dir, &p.out)
	if err != nil {
		tb.Fatalf("start peer %s on %s: %v", name, addr, err)
	}
	p.signal = r.signal
	p.abort = func() { r.conn.Close() }
	go func() {
		<-r.done
		p.err, p.exited = r.err, time.Now()
		close(p.done)
	}()
	p.cleanup(tb)
	return p
}

// cleanup stops the peer at the end of the test and logs its output if
// the test failed. The first peer of a test also registers the summary
// (peerSummary), which runs after every peer's cleanup.
func (p *Peer) cleanup(tb testing.TB) {
	addToSummary(tb, p)
	tb.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.stopped = true
		}
		p.Stop()
		if tb.Failed() {
			tb.Logf("peer %s output:\n%s", p.describe(), p.Output())
		}
	})
}

// describe names the peer with its arguments and host.
func (p *Peer) describe() string {
	s := strings.TrimSpace(p.name + " " + strings.Join(p.args, " "))
	if p.where != "" {
		s += " (on " + p.where + ")"
	}
	return s
}

// status says how the peer ended, for the summary: by itself (when, and
// its exit error) or stopped at the end of the test.
func (p *Peer) status(t0 time.Time) string {
	at := func(t time.Time) string { return fmt.Sprintf("+%.2fs", t.Sub(t0).Seconds()) }
	how := "exit status 0"
	if p.err != nil {
		how = p.err.Error()
	}
	if p.stopped {
		return fmt.Sprintf("started %s, still running at the end of the test, then stopped (%s at %s)", at(p.start), how, at(p.exited))
	}
	return fmt.Sprintf("started %s, exited by itself at %s: %s", at(p.start), at(p.exited), how)
}

// summaries holds, per test, the peers it started, in order.
var summaries sync.Map // testing.TB -> *peerSummary

type peerSummary struct {
	mu    sync.Mutex
	t0    time.Time
	peers []*Peer
}

// addToSummary records p among tb's peers. The first peer of tb
// registers the cleanup that, if tb failed, logs one line per peer: how
// and when each ended. It runs after the peers' own cleanups (which log
// their outputs), so that the last lines of a failed test say which
// program died first and how, whatever the length of the outputs.
func addToSummary(tb testing.TB, p *Peer) {
	v, loaded := summaries.LoadOrStore(tb, &peerSummary{t0: p.start})
	s := v.(*peerSummary)
	if !loaded {
		tb.Cleanup(func() {
			summaries.Delete(tb)
			if !tb.Failed() {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			var b strings.Builder
			fmt.Fprintf(&b, "peers of %s (times from the first one's start):", tb.Name())
			for _, p := range s.peers {
				fmt.Fprintf(&b, "\n  %s: %s", p.describe(), p.status(s.t0))
			}
			tb.Log(b.String())
		})
	}
	s.mu.Lock()
	s.peers = append(s.peers, p)
	s.mu.Unlock()
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

// Exited is when the peer was seen to exit (zero until Done is closed).
func (p *Peer) Exited() time.Time {
	select {
	case <-p.done:
		return p.exited
	default:
		return time.Time{}
	}
}

// Done is closed when the peer has exited.
func (p *Peer) Done() <-chan struct{} { return p.done }

// UntilExit returns a context done when ctx is or when the peer has
// exited, whichever comes first: a wait for a server to listen ends at
// once when the server gives up. cancel releases it.
func (p *Peer) UntilExit(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-c.Done():
		}
	}()
	return c, cancel
}

// Running reports whether the program has not ended yet.
func (p *Peer) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

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

// Pid returns the process id of a peer on this host (StartPeer), 0 for
// one on another host.
func (p *Peer) Pid() int { return p.pid }

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
