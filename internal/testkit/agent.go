package testkit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The agent runs programs for a test on another host of the two-host
// topology (rxevm -hosts 2). Host B runs it (rxectl agent) on the wire
// address; a test on host A reaches it through PeerHost. Every program is
// one TCP connection: the client sends an agentRequest (a JSON line), then
// possibly more requests carrying a signal; the agent answers with
// agentReply lines (output as it comes, then the exit status) and closes
// the connection. When the client's side of the connection goes away
// before the program exits, the agent kills the program's process group:
// a test that dies leaves nothing running on the peer host.

// AgentPort is the TCP port of the agent on host B's wire address.
const AgentPort = 7471

type agentRequest struct {
	Op     string   `json:"op"`             // "run", "ping", "shutdown"; "" on later messages
	Args   []string `json:"args,omitempty"` // run: program and arguments
	Env    []string `json:"env,omitempty"`  // run: added to the agent's environment
	Dir    string   `json:"dir,omitempty"`  // run: working directory ("" = /tmp)
	Signal int      `json:"signal,omitempty"`
}

type agentReply struct {
	Out  []byte     `json:"out,omitempty"`
	Exit *agentExit `json:"exit,omitempty"`
}

// agentExit is how a program ended: Code as exec.ExitError gives it (-1
// when killed by a signal, named in Signal), or Err if it did not start.
type agentExit struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	Err    string `json:"err,omitempty"`
}

// RemoteExitError is a program on the peer host that exited non-zero, was
// killed, or did not start.
type RemoteExitError struct {
	Host string // the agent's address
	Code int    // exit status; -1 when killed by a signal or not started
	Sig  string // the signal that killed it
	Err  string // why it did not start
}

func (e *RemoteExitError) Error() string {
	switch {
	case e.Err != "":
		return "on " + e.Host + ": " + e.Err
	case e.Sig != "":
		return "on " + e.Host + ": signal: " + e.Sig
	}
	return fmt.Sprintf("on %s: exit status %d", e.Host, e.Code)
}

// ExitCode returns the exit status (-1 if there is none).
func (e *RemoteExitError) ExitCode() int { return e.Code }

func (x *agentExit) err(host string) error {
	if x.Code == 0 && x.Signal == "" && x.Err == "" {
		return nil
	}
	return &RemoteExitError{Host: host, Code: x.Code, Sig: x.Signal, Err: x.Err}
}

// Agent runs programs for clients on other hosts; see Serve.
type Agent struct {
	Log  io.Writer // one line per program started and ended; nil: none
	seq  atomic.Int64
	mu   sync.Mutex
	stop chan struct{}
}

// Serve accepts connections on l and serves each (a program run, a
// ping or a shutdown request) until ctx is done or a client asks it to
// shut down; then it closes l, kills what still runs and returns nil. It
// returns the listener's error if accepting fails otherwise.
func (a *Agent) Serve(ctx context.Context, l net.Listener) error {
	a.mu.Lock()
	if a.stop == nil {
		a.stop = make(chan struct{})
	}
	stop := a.stop
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		l.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			select {
			case <-stop:
				return nil
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.serveConn(ctx, c)
		}()
	}
}

func (a *Agent) logf(format string, args ...any) {
	if a.Log != nil {
		fmt.Fprintf(a.Log, "agent: "+format+"\n", args...)
	}
}

// shutdown makes Serve return.
func (a *Agent) shutdown() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop == nil {
		a.stop = make(chan struct{})
	}
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
}

func (a *Agent) serveConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	dec := json.NewDecoder(bufio.NewReader(c))
	var enc struct {
		sync.Mutex
		*json.Encoder
	}
	enc.Encoder = json.NewEncoder(c)
	send := func(r agentReply) {
		enc.Lock()
		defer enc.Unlock()
		_ = enc.Encode(r)
	}
	var req agentRequest
	if err := dec.Decode(&req); err != nil {
		a.logf("%s: bad request: %v", c.RemoteAddr(), err)
		return
	}
	switch req.Op {
	case "ping":
		send(agentReply{Exit: &agentExit{}})
		return
	case "shutdown":
		a.logf("shutdown requested by %s", c.RemoteAddr())
		send(agentReply{Exit: &agentExit{}})
		a.shutdown()
		return
	case "run":
	default:
		send(agentReply{Exit: &agentExit{Code: -1, Err: fmt.Sprintf("unknown op %q", req.Op)}})
		return
	}
	if len(req.Args) == 0 {
		send(agentReply{Exit: &agentExit{Code: -1, Err: "no program given"}})
		return
	}
	n := a.seq.Add(1)
	start := time.Now()
	a.logf("#%d start: %s", n, strings.Join(req.Args, " "))
	out := writerFunc(func(p []byte) (int, error) {
		send(agentReply{Out: append([]byte(nil), p...)})
		return len(p), nil
	})
	dir := req.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	proc, err := startProc(req.Args[0], req.Args[1:], req.Env, dir, out)
	if err != nil {
		a.logf("#%d did not start: %v", n, err)
		send(agentReply{Exit: &agentExit{Code: -1, Err: err.Error()}})
		return
	}
	// Further messages carry signals; the end of the connection kills.
	go func() {
		for {
			var m agentRequest
			if err := dec.Decode(&m); err != nil {
				proc.signal(syscall.SIGKILL)
				return
			}
			if m.Signal != 0 {
				proc.signal(syscall.Signal(m.Signal))
			}
		}
	}()
	select {
	case <-proc.done:
	case <-ctx.Done():
		proc.signal(syscall.SIGKILL)
		<-proc.done
	}
	x := exitOf(proc.err)
	a.logf("#%d %s: %s after %s", n, req.Args[0], x.describe(), time.Since(start).Round(time.Millisecond))
	send(agentReply{Exit: &x})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func exitOf(err error) agentExit {
	if err == nil {
		return agentExit{}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return agentExit{Code: -1, Signal: ws.Signal().String()}
		}
		return agentExit{Code: ee.ExitCode()}
	}
	return agentExit{Code: -1, Err: err.Error()}
}

func (x agentExit) describe() string {
	switch {
	case x.Err != "":
		return x.Err
	case x.Signal != "":
		return "killed: " + x.Signal
	}
	return fmt.Sprintf("exit %d", x.Code)
}

// proc is a program started by startProc.
type proc struct {
	pid  int
	done chan struct{} // closed once it exited and its output is copied
	err  error         // cmd.Wait's; valid after done
}

func (p *proc) signal(s syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.pid, s)
	}
}

// startProc starts name with args in dir ("" = ours) in its own process
// group, its stdout and stderr on a pseudo-terminal (so C stdio line-buffers) copied to out,
// with LD_LIBRARY_PATH set to the guest's library directory and env added.
func startProc(name string, args, env []string, dir string, out io.Writer) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+GuestLibPath)
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = dir // "": the caller's
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pty, err := OpenPTY(out)
	if err != nil {
		cmd.Stdout, cmd.Stderr = out, out
	} else {
		cmd.Stdout, cmd.Stderr = pty.Slave, pty.Slave
	}
	if err := cmd.Start(); err != nil {
		if pty != nil {
			pty.Finish()
		}
		return nil, err
	}
	p := &proc{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		if pty != nil {
			pty.Finish()
		}
		close(p.done)
	}()
	return p, nil
}

// agentCall sends one request that the agent answers with a bare exit
// (ping, shutdown).
func agentCall(ctx context.Context, addr, op string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if err := json.NewEncoder(c).Encode(agentRequest{Op: op}); err != nil {
		return err
	}
	var r agentReply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		return fmt.Errorf("agent %s: %s: %w", addr, op, err)
	}
	if r.Exit == nil {
		return fmt.Errorf("agent %s: %s: no status in the reply", addr, op)
	}
	return r.Exit.err(addr)
}

// WaitAgent waits until the agent at addr answers a ping, retrying until
// ctx is done.
func WaitAgent(ctx context.Context, addr string) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := agentCall(pctx, addr, "ping")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent %s does not answer: %w (last: %v)", addr, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StopAgent asks the agent at addr to stop serving.
func StopAgent(ctx context.Context, addr string) error { return agentCall(ctx, addr, "shutdown") }

// remoteProc is a program the agent at addr runs for us.
type remoteProc struct {
	addr string
	conn net.Conn
	mu   sync.Mutex
	enc  *json.Encoder
	done chan struct{}
	err  error // valid after done
}

// startRemote asks the agent at addr to run args[0] with args[1:]; what
// it prints goes to out. When ctx is done the program is killed.
func startRemote(ctx context.Context, addr string, args, env []string, dir string, out io.Writer) (*remoteProc, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", addr, err)
	}
	r := &remoteProc{addr: addr, conn: c, enc: json.NewEncoder(c), done: make(chan struct{})}
	if err := r.enc.Encode(agentRequest{Op: "run", Args: args, Env: env, Dir: dir}); err != nil {
		c.Close()
		return nil, fmt.Errorf("agent %s: %w", addr, err)
	}
	go func() {
		defer close(r.done)
		defer c.Close()
		dec := json.NewDecoder(bufio.NewReader(c))
		for {
			var m agentReply
			if err := dec.Decode(&m); err != nil {
				r.err = fmt.Errorf("agent %s: connection lost before the program ended: %w", addr, err)
				return
			}
			if len(m.Out) > 0 {
				out.Write(m.Out)
			}
			if m.Exit != nil {
				r.err = m.Exit.err(addr)
				return
			}
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			r.signal(syscall.SIGKILL)
			// The agent kills the program when the connection closes
			// too; close it if the agent does not answer.
			t := time.NewTimer(stopGrace)
			defer t.Stop()
			select {
			case <-r.done:
			case <-t.C:
				c.Close()
			}
		case <-r.done:
		}
	}()
	return r, nil
}

func (r *remoteProc) signal(s syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
	default:
		r.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := r.enc.Encode(agentRequest{Signal: int(s)}); err != nil {
			r.conn.Close()
		}
	}
}

// RunRemote runs args[0] with args[1:] and env added on the agent at addr
// (in /tmp), copies its output to out as it comes and returns its exit
// error (a *RemoteExitError for a non-zero status). When ctx is done the
// program is killed.
func RunRemote(ctx context.Context, addr string, args, env []string, out io.Writer) error {
	r, err := startRemote(ctx, addr, args, env, "", out)
	if err != nil {
		return err
	}
	<-r.done
	return r.err
}
