package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// The two-host topology (-hosts 2): two guests booting the same kernel and
// initramfs, joined by a virtual Ethernet wire: QEMU's socket netdev with
// an e1000 NIC in each guest. With -wire tcp (the default) guest A's QEMU
// listens on a loopback TCP port and B's connects to it (the wire is a TCP
// stream carrying each frame behind a length), and the runner switches
// Nagle's algorithm off on A's end of that connection (setNoDelay: QEMU
// 7.2 does so only on the connecting end, and RC traffic then waits ~40 ms
// for delayed ACKs; docs/testing.md); -wire tcp-nagle leaves QEMU's
// sockets as they are. With -wire udp each QEMU sends its frames as UDP
// datagrams to the other's loopback port. The
// kernel command line tells each guest its role (pv.host=a|b, initScript):
// both bring up eth0 (testkit.WireAddrA / WireAddrB, /24) and rxe device
// testkit.WireDev on it; B runs the agent, A waits for it and runs the
// tests, then stops the agent so that B ends too.
//
// The run passes only if both guests do: A's test binaries by the usual
// rules, and B's agent must start, end with status 0 and B must reach its
// end marker. When one guest dies the other is stopped; on any failure the
// tails of both consoles are printed.
//
// The one exception: a test on A may announce on A's console that host B
// is to lose its power (testkit.Host.PowerOff: a "POWEROFF B;" marker
// from a test binary, once per run). The runner then kills B's QEMU with
// SIGKILL itself, which is what a power loss is to the guest: nothing in
// it runs any more, not even the kernel's shutdown path (which sysrq o or
// poweroff would run: device shutdown, the NIC taking its link down), and
// its end of the wire goes silent while A's NIC keeps its carrier, as
// with a switch between the hosts. Only that death of B is accepted (B's
// agent and end marker are then not expected); B dying in any other way,
// or before the announcement, fails the run as before.

// wireDescs describe the -wire choices.
var wireDescs = map[string]string{
	"tcp":       "QEMU socket netdev, TCP, A listens, B connects, TCP_NODELAY on both ends",
	"tcp-nagle": "QEMU socket netdev, TCP, A listens, B connects, Nagle on A's end as QEMU 7.2 leaves it",
	"udp":       "QEMU socket netdev, UDP datagrams",
}

// MAC addresses of the two NICs (their GIDs follow from them).
const (
	wireMACA = "52:54:00:77:00:01"
	wireMACB = "52:54:00:77:00:02"
)

// After one guest ended, how long the other may take to end on its own.
const (
	pairGrace     = 30 * time.Second // B after A: agent-stop, DONE, power-off
	pairDeathWait = 3 * time.Second  // A after B died: let A print what failed
)

// pairResult is a two-host run on one kernel.
type pairResult struct {
	a, b    *kernelResult
	prepErr error
}

func (r *pairResult) ok() bool { return r.prepErr == nil && r.a.ok() && r.b.ok() }

func (r *pairResult) String() string {
	if r.prepErr != nil {
		return "prepare failed: " + r.prepErr.Error()
	}
	return "host A: " + r.a.String() + " | host B: " + r.b.String()
}

// newPairResult expects the test binaries of p (and -shell-cmd) on host A
// and the agent on host B.
func newPairResult(short string, p *payload, o *options) *pairResult {
	r := &pairResult{
		a: newKernelResult(short, p, o),
		b: &kernelResult{short: short, host: "B", bins: []*binResult{{label: agentLabel}}},
	}
	r.a.host = "A"
	r.a.powerOff = make(chan string, 1)
	return r
}

// wireArgs returns the NIC options of guests A and B for wire "tcp",
// "tcp-nagle" or "udp", on free loopback ports, and the TCP port A listens
// on (0 for udp).
func wireArgs(wire string) (a, b []string, listen int, err error) {
	dev := func(mac string) []string { return []string{"-device", "e1000,netdev=w,mac=" + mac} }
	if wire == "udp" {
		pa, err := freePort("udp")
		if err != nil {
			return nil, nil, 0, err
		}
		pb, err := freePort("udp")
		if err != nil {
			return nil, nil, 0, err
		}
		a = append([]string{"-netdev", fmt.Sprintf("socket,id=w,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", pb, pa)}, dev(wireMACA)...)
		b = append([]string{"-netdev", fmt.Sprintf("socket,id=w,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", pa, pb)}, dev(wireMACB)...)
		return a, b, 0, nil
	}
	p, err := freePort("tcp")
	if err != nil {
		return nil, nil, 0, err
	}
	a = append([]string{"-netdev", fmt.Sprintf("socket,id=w,listen=127.0.0.1:%d", p)}, dev(wireMACA)...)
	b = append([]string{"-netdev", fmt.Sprintf("socket,id=w,connect=127.0.0.1:%d", p)}, dev(wireMACB)...)
	return a, b, p, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(network string) (int, error) {
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// guest is one QEMU of a pair.
type guest struct {
	res    *kernelResult
	pid    int // QEMU's
	cancel context.CancelFunc
	exited chan struct{}
	tail   []string // valid after exited
	werr   error    // valid after exited
	mu     sync.Mutex
	stop   string // why the runner stopped it ("" if it did not)
	off    string // who had the runner power it off ("" if nobody)
}

// startGuest boots QEMU with args; its console goes through follow (to
// w) into res.
func startGuest(ctx context.Context, o *options, args []string, res *kernelResult, w, stderr io.Writer) (*guest, error) {
	if o.verbose {
		fmt.Fprintln(w, "rxevm: qemu-system-x86_64", strings.Join(args, " "))
	}
	gctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(gctx, "qemu-system-x86_64", args...)
	cmd.Stdin = nil
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	g := &guest{res: res, cancel: cancel, exited: make(chan struct{}), pid: cmd.Process.Pid}
	go func() {
		defer close(g.exited)
		g.tail = follow(out, w, o.verbose, res, start)
		g.werr = cmd.Wait()
	}()
	return g, nil
}

// kill stops the guest, saying why, unless it has exited already.
func (g *guest) kill(why string) {
	select {
	case <-g.exited:
		return
	default:
	}
	g.mu.Lock()
	if g.stop == "" {
		g.stop = why
	}
	g.mu.Unlock()
	g.cancel()
}

// powerOff kills the guest's QEMU (SIGKILL), as a power loss, at the
// request of by. It reports false, doing nothing, if the guest has ended
// already or the runner is stopping it for another reason.
func (g *guest) powerOff(by string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.exited:
		return false
	default:
	}
	if g.stop != "" || g.off != "" {
		return false
	}
	g.off = by
	g.cancel() // exec.CommandContext: SIGKILL
	return true
}

// poweredOff reports whether powerOff took.
func (g *guest) poweredOff() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.off != ""
}

// finish records how the guest ended, once it has exited: ctx is the
// pair's (its deadline is the run's timeout).
func (g *guest) finish(ctx context.Context) {
	<-g.exited
	g.mu.Lock()
	defer g.mu.Unlock()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		g.res.timedOut = true
	}
	g.res.stopped = g.stop
	if g.off != "" {
		g.res.poweredOff = g.off
		// QEMU ended by our SIGKILL, not on its own just before.
		var ee *exec.ExitError
		if !errors.As(g.werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			g.res.qemuErr = fmt.Errorf("ended by itself (%v) when the runner was to power it off", g.werr)
		}
		return
	}
	if g.werr != nil && !g.res.timedOut && g.stop == "" && ctx.Err() == nil {
		g.res.qemuErr = g.werr
	}
}

// runPair boots the two hosts and runs the payload; when a guest kernel
// panicked while booting, before any test program began on host A (the
// emulator, as for one host: kernelResult.bootPanic), it boots the pair
// once more.
func runPair(ctx context.Context, o *options, k kernelSpec, p *payload, work string) *pairResult {
	res := runPairOnce(ctx, o, k, p, work)
	if res.bootPanic() && ctx.Err() == nil {
		fmt.Printf("rxevm: kernel %s panicked while booting on host %s, before its setup finished and before any test program ran (the emulated machine, not a test): booting both hosts once more\n", k.short, res.panickedHost())
		res = runPairOnce(ctx, o, k, p, work)
	}
	return res
}

// bootPanic reports a pair whose run can simply be repeated: a host's
// kernel panicked while booting, and no test program began on host A.
// (Host B's agent is the runner's own, not a test: it may have started.)
func (r *pairResult) bootPanic() bool {
	if r.prepErr != nil || !(r.a.bootPanic() || r.b.panicked && !r.b.setupOK) {
		return false
	}
	for _, b := range r.a.bins {
		if b.began {
			return false
		}
	}
	return true
}

// panickedHost names the host bootPanic found, for the log.
func (r *pairResult) panickedHost() string {
	if r.a.panicked {
		return "A"
	}
	return "B"
}

func runPairOnce(ctx context.Context, o *options, k kernelSpec, p *payload, work string) *pairResult {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res := newPairResult(k.short, p, o)
	fmt.Printf("rxevm: === kernel %s, two hosts (wire: %s) ===\n", k.short, wireDescs[o.wire])
	a, err := prepareKernel(ctx, o, k)
	if err != nil {
		res.prepErr = err
		return res
	}
	res.a.kernel, res.b.kernel = a.release, a.release
	initrd := filepath.Join(work, "initrd-"+k.short)
	if err := makeInitrd(ctx, a.base, p.overlay, initrd); err != nil {
		res.prepErr = err
		return res
	}
	nicA, nicB, listen, err := wireArgs(o.wire)
	if err != nil {
		res.prepErr = err
		return res
	}
	outB := &prefixWriter{prefix: "B| ", w: os.Stdout}
	errB := &prefixWriter{prefix: "B| ", w: os.Stderr}
	gA, err := startGuest(ctx, o, qemuArgs(o, a, initrd, "pv.host=a", nicA...), res.a, os.Stdout, os.Stderr)
	if err != nil {
		res.prepErr = err
		return res
	}
	fmt.Printf("rxevm: booting host A, %s (TCG, usually 10-30 s to set up both hosts)\n", a.release)
	if listen != 0 {
		// B's QEMU connects once: A's must listen first.
		lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
		go func() {
			select {
			case <-gA.exited:
				lcancel()
			case <-lctx.Done():
			}
		}()
		err := testkit.WaitTCPListen(lctx, listen)
		lcancel()
		if err != nil {
			gA.kill("its QEMU never listened on the wire")
			gA.finish(ctx)
			res.prepErr = fmt.Errorf("host A's QEMU does not listen on 127.0.0.1:%d: %w", listen, err)
			printTail(res.a, gA.tail)
			return res
		}
	}
	gB, err := startGuest(ctx, o, qemuArgs(o, a, initrd, "pv.host=b", nicB...), res.b, outB, errB)
	if err != nil {
		gA.kill("host B's QEMU did not start")
		gA.finish(ctx)
		res.prepErr = err
		return res
	}
	fmt.Println("rxevm: booting host B")
	if o.wire == "tcp" {
		if err := setNoDelay(ctx, gA.pid, listen); err != nil {
			fmt.Printf("rxevm: warning: Nagle's algorithm stays on for host A's end of the wire (%v): "+
				"RC traffic will wait for delayed ACKs, tens of ms per message (docs/testing.md)\n", err)
		} else if o.verbose {
			fmt.Println("rxevm: TCP_NODELAY set on host A's end of the wire")
		}
	}
	// A test on A may have B powered off (testkit.Host.PowerOff); the
	// console of A sends the request, before A can end.
	powerOff := func(by string) {
		if gB.powerOff(by) {
			fmt.Printf("rxevm: host B powered off (its QEMU killed) at the request of %s\n", by)
		} else {
			fmt.Printf("rxevm: %s asked to power off host B, which had already ended: its end was not announced\n", by)
		}
	}
	for waiting := true; waiting; {
		select {
		case by := <-res.a.powerOff:
			powerOff(by)
		case <-gA.exited:
			select {
			case by := <-res.a.powerOff:
				powerOff(by)
			default:
			}
			waiting = false
			if gB.poweredOff() {
				<-gB.exited // killed
				break
			}
			// B ends once A's run.sh stops its agent.
			t := time.NewTimer(pairGrace)
			select {
			case <-gB.exited:
			case <-t.C:
				gB.kill(fmt.Sprintf("still running %s after host A ended", pairGrace))
			}
			t.Stop()
		case <-gB.exited:
			waiting = false
			if gB.poweredOff() {
				// As announced: A's test goes on without B.
				<-gA.exited
				break
			}
			if !res.b.done {
				// B died: A's tests cannot go on (a dead peer does not
				// even reset their TCP connections).
				t := time.NewTimer(pairDeathWait)
				select {
				case <-gA.exited:
				case <-t.C:
					gA.kill("host B died")
				}
				t.Stop()
			}
		}
	}
	gA.finish(ctx)
	gB.finish(ctx)
	outB.Flush()
	errB.Flush()
	for _, g := range []*guest{gA, gB} {
		if g.res.timedOut {
			fmt.Printf("rxevm: kernel %s, host %s: timed out after %s\n", k.short, g.res.host, o.timeout)
		}
		if g.res.qemuErr != nil {
			fmt.Printf("rxevm: host %s: qemu: %v\n", g.res.host, g.res.qemuErr)
		}
		if g.res.stopped != "" {
			fmt.Printf("rxevm: host %s stopped by the runner: %s\n", g.res.host, g.res.stopped)
		}
	}
	res.a.printSkips(os.Stdout)
	if !res.ok() {
		printTail(res.a, gA.tail)
		printTail(res.b, gB.tail)
	}
	return res
}

// printTail prints a guest's console tail.
func printTail(r *kernelResult, tail []string) {
	who := "guest"
	if r.host != "" {
		who = "host " + r.host
	}
	fmt.Printf("rxevm: ---- %s console tail (last %d lines, kernel %s) ----\n", who, len(tail), r.kernel)
	for _, l := range tail {
		fmt.Println("| " + l)
	}
	fmt.Printf("rxevm: ---- end of %s console tail ----\n", who)
}

// prefixWriter writes each line to w with a prefix, whole lines at a time
// (so that two guests' consoles interleave only between lines).
type prefixWriter struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
	}
	return len(b), nil
}

// Flush writes a last unterminated line.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.w.Write(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = nil
	}
}

// setNoDelay sets TCP_NODELAY on the connection QEMU process pid accepted
// on port (host A's end of the wire), once host B's QEMU has connected.
//
// QEMU 7.2's socket netdev disables Nagle's algorithm on the connecting
// end only (net_socket_connect_init goes through
// net_socket_fd_init_stream, which calls socket_set_nodelay;
// net_socket_accept does not). On A's end a frame written while an earlier
// one is unacknowledged then waits for the ACK, which B's kernel delays
// (40 ms minimum) because B's QEMU has nothing to send back yet: every RC
// exchange, in which A sends two frames in a row (its ACK and its next
// message), stalls that long. The option belongs to the socket, so setting
// it through a duplicate of QEMU's descriptor (pidfd_getfd) is enough.
func setNoDelay(ctx context.Context, pid, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		fd, err := acceptedFD(pid, port)
		if err == nil {
			return noDelayIn(pid, fd)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no connection accepted on 127.0.0.1:%d by QEMU (pid %d): %w", port, pid, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// acceptedFD returns the descriptor of process pid that is an established
// TCP connection with local port port.
func acceptedFD(pid, port int) (int, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf(":%04X", port)
	inodes := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "01" {
			inodes["socket:["+f[9]+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return 0, errors.New("no established connection yet")
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && inodes[l] {
			return strconv.Atoi(e.Name())
		}
	}
	return 0, fmt.Errorf("the connection on port %d is not QEMU's", port)
}

// noDelayIn sets TCP_NODELAY on descriptor fd of process pid and checks it
// took.
func noDelayIn(pid, fd int) error {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return fmt.Errorf("pidfd_getfd: %w", err)
	}
	defer unix.Close(dup)
	if err := unix.SetsockoptInt(dup, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fmt.Errorf("setsockopt TCP_NODELAY: %w", err)
	}
	if v, err := unix.GetsockoptInt(dup, unix.IPPROTO_TCP, unix.TCP_NODELAY); err != nil || v == 0 {
		return fmt.Errorf("TCP_NODELAY reads %d (%v) after setting it", v, err)
	}
	return nil
}
