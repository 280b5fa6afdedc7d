package main

// VM tests (go run ./internal/testkit/cmd/rxevm ./cmd/asyncwatch -- -run VM):
// run() beside rdma-core's ibv_asyncwatch on the same device.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// outBuf is run's stdout: it records every write and wakes waiters.
type outBuf struct{ testkit.Output }

func newOutBuf() *outBuf { return new(outBuf) }

func (o *outBuf) waitFor(ctx context.Context, substr string) error {
	if err := o.WaitFor(ctx, substr, nil); err != nil {
		return fmt.Errorf("waiting for %q from run: %w; output so far:\n%s", substr, err, o.String())
	}
	return nil
}

var headerRE = regexp.MustCompile(`^(\S+): async event FD (\d+)$`)

func eventLines(out string) []string {
	var ls []string
	for {
		l, rest, ok := strings.Cut(out, "\n")
		if !ok {
			return ls
		}
		if strings.HasPrefix(l, "  event_type ") {
			ls = append(ls, l)
		}
		out = rest
	}
}

func countC(p *testkit.Peer) int { return len(eventLines(p.Output())) }

// waitC waits until ibv_asyncwatch printed at least n event lines.
func waitC(ctx context.Context, p *testkit.Peer, n int) error {
	for countC(p) < n {
		cur := p.Output()
		if !strings.HasSuffix(cur, "\n") {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			<-tctx.Done()
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		if err := p.WaitForOutput(ctx, cur+"  event_type "); err != nil && countC(p) < n {
			return err
		}
	}
	return nil
}

func ipQuiet(args ...string) { exec.Command("ip", args...).Run() }

// startBoth starts ibv_asyncwatch and run() with the same arguments and
// returns once both have opened the device (printed their header).
func startBoth(ctx context.Context, t *testing.T, args ...string) (c *testkit.Peer, out *outBuf, done <-chan int, stop func()) {
	t.Helper()
	c = testkit.StartPeer(ctx, t, "ibv_asyncwatch", args...)
	out = newOutBuf()
	var stderr testkit.Output
	rctx, rcancel := context.WithCancel(ctx)
	d := make(chan int, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		d <- run(rctx, args, out, &stderr)
	}()
	t.Cleanup(func() {
		// A test that failed early leaves run running: stop it and wait
		// until it has closed its device before the leak check looks.
		rcancel()
		<-returned
		if t.Failed() {
			t.Logf("run stderr: %s", stderr.String())
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := c.WaitForOutput(wctx, "async event FD "); err != nil {
		t.Fatal(err)
	}
	if err := out.waitFor(wctx, "async event FD "); err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr.String())
	}
	return c, out, d, rcancel
}

// TestVMRunBesideC: our asyncwatch and the C ibv_asyncwatch, running at the
// same time on the same device, print the same lines.
func TestVMRunBesideC(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const v4, v6 = "10.99.2.5/24", "fd00:98::5/64"
	t.Cleanup(func() {
		ipQuiet("addr", "del", v4, "dev", testkit.RxeNetdev)
		ipQuiet("addr", "del", v6, "dev", testkit.RxeNetdev)
		ipQuiet("link", "set", "dev", testkit.RxeNetdev, "up")
	})
	c, out, done, stop := startBoth(ctx, t, "-d", testkit.RxeDev)

	dev := testkit.RxeNetdev
	steps := []struct {
		name string
		do   func()
	}{
		{"link down", func() { testkit.SetLink(t, dev, false) }},
		{"link up", func() { testkit.SetLink(t, dev, true) }},
		{"add " + v4, func() { testkit.AddAddr(t, dev, v4) }},
		// busybox ip (the guest's, for now) has no "nodad"; d0 is a
		// dummy (NOARP) device, so there is no DAD to skip anyway.
		{"add " + v6, func() { ipQuiet("addr", "add", v6, "dev", dev) }},
		{"del " + v4, func() { testkit.DelAddr(t, dev, v4) }},
		{"del " + v6, func() { testkit.DelAddr(t, dev, v6) }},
	}
	for _, s := range steps {
		n := countC(c)
		s.do()
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		err := waitC(wctx, c, n+1)
		wcancel()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	// Let the C tool settle: no new line within 2 s.
	for {
		cur := c.Output()
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.WaitForOutput(qctx, cur+"  event_type ")
		qcancel()
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
			break
		}
	}
	cl := eventLines(c.Output())
	// Ours must print exactly those lines: wait for the whole text.
	want := strings.Join(cl, "\n") + "\n"
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := out.waitFor(wctx, want); err != nil {
		t.Fatalf("our output never matched ibv_asyncwatch's:\n%v", err)
	}
	stop() // as SIGINT does
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("run returned %d after cancel, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10s of cancel")
	}
	got := out.String()
	gh, _, _ := strings.Cut(got, "\n")
	ch, _, _ := strings.Cut(c.Output(), "\n")
	hm, cm := headerRE.FindStringSubmatch(gh), headerRE.FindStringSubmatch(ch)
	if hm == nil || cm == nil || hm[1] != cm[1] {
		t.Errorf("headers: ours %q, C %q", gh, ch)
	}
	if gl := eventLines(got); strings.Join(gl, "\n") != strings.Join(cl, "\n") {
		t.Fatalf("event lines differ:\nours:\n%s\nC:\n%s", strings.Join(gl, "\n"), strings.Join(cl, "\n"))
	}
	if want := gh + "\n" + strings.Join(cl, "\n") + "\n"; got != want {
		t.Errorf("our whole output %q, want header plus the C lines %q", got, want)
	}
	if out.Writes() != 1+len(cl) {
		t.Errorf("%d writes for %d lines: each line must go out on its own", out.Writes(), 1+len(cl))
	}
	t.Logf("ours:\n%sC:\n%s", got, c.Output())
}

// TestVMRunDefaultDevice: without -d both pick the same (first) device.
func TestVMRunDefaultDevice(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, out, done, stop := startBoth(ctx, t)
	gh, _, _ := strings.Cut(out.String(), "\n")
	ch, _, _ := strings.Cut(c.Output(), "\n")
	hm, cm := headerRE.FindStringSubmatch(gh), headerRE.FindStringSubmatch(ch)
	if hm == nil || cm == nil || hm[1] != cm[1] {
		t.Fatalf("default device: ours %q, ibv_asyncwatch %q", gh, ch)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("run returned %d, want 0", code)
	}
	t.Logf("both chose %s", hm[1])
}

// TestVMRunUnknownDevice matches ibv_asyncwatch's message and status.
func TestVMRunUnknownDevice(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cout, cerr := testkit.RunPeer(ctx, t, "ibv_asyncwatch", "-d", "nosuchdev9")
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"-d", "nosuchdev9"}, &stdout, &stderr)
	first, _, _ := strings.Cut(stderr.String(), "\n")
	if code != 1 || cerr == nil || strings.TrimSpace(cout) != first {
		t.Errorf("ours: %d %q; ibv_asyncwatch: %v %q", code, stderr.String(), cerr, cout)
	}
}

// TestVMSameAsC: command lines that end before any event is watched end
// as in ibv_asyncwatch: the same lines (the library's detail lines aside)
// and exit status, from getopt's complaints and -h, met in order, to an
// unknown device; operands are ignored by both.
func TestVMSameAsC(t *testing.T) {
	testkit.RequireVM(t)
	// By its path, so that the comparison's renaming of the program
	// (argv[0]) leaves the usage's "start an asyncwatch process" alone.
	bin, err := exec.LookPath("asyncwatch")
	if err != nil {
		t.Fatal(err)
	}
	pptest.CompareWithC(t, bin, "ibv_asyncwatch", func() []string { return nil }, [][]string{
		{"-h"}, {"--help"}, {"-x"}, {"-x", "-h"}, {"-h", "-x"}, {"--help=1"}, {"--nosuch=1"},
		{"-ib-dev=" + testkit.RxeDev}, {"-d", "nosuchdev9"}, {"--ib", "nosuchdev9"},
		{"-d", ""}, {"--ib-dev="},
	}, nil)
}

// TestVMSignalEnds: SIGINT and SIGTERM end a watching asyncwatch as they
// end ibv_asyncwatch, which installs no handler: killed by the signal
// (a shell's 130 or 143), not exit status 0. Ours closes its context
// first.
func TestVMSignalEnds(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sig := range []os.Signal{os.Interrupt, sigterm} {
		for _, bin := range []string{"asyncwatch", "ibv_asyncwatch"} {
			// On a terminal: C's stdout to a pipe is block-buffered,
			// and the header is how the test knows the tool watches.
			hw := &headerWriter{seen: make(chan struct{})}
			pty, err := testkit.OpenPTY(hw)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, bin, "-d", testkit.RxeDev)
			cmd.Stdout, cmd.Stderr = pty.Slave, pty.Slave
			if err := cmd.Start(); err != nil {
				pty.Finish()
				t.Fatal(err)
			}
			select {
			case <-hw.seen:
			case <-ctx.Done():
				cmd.Process.Kill()
				cmd.Wait()
				pty.Finish()
				t.Fatalf("%s: no header: %v", bin, ctx.Err())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			pty.Finish()
			if ps := cmd.ProcessState; ps.ExitCode() != -1 || ps.String() != "signal: "+sig.String() {
				t.Errorf("%s after %v: %v (%v), want killed by %v", bin, sig, cmd.ProcessState, err, sig)
			}
		}
	}
}

// headerWriter closes seen once asyncwatch's header has been written.
type headerWriter struct {
	mu   sync.Mutex
	buf  []byte
	seen chan struct{}
	done bool
}

func (w *headerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if !w.done && strings.Contains(string(w.buf), "async event FD") && strings.Contains(string(w.buf), "\n") {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}
