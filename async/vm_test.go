package async_test

// Tests in the rdma_rxe VM (go run ./internal/testkit/cmd/rxevm ./async -- -run VM).
// rdma-core's ibv_asyncwatch runs beside our Reader on the same device and
// serves as the oracle: both receive every async event the kernel raises
// (each open context has its own event queue), so our sequence must equal
// the one it prints, line for line.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// eventPrefix starts every event line ibv_asyncwatch prints:
// "  event_type IBV_EVENT_PORT_ACTIVE (9), port 1".
const eventPrefix = "  event_type "

var headerRE = regexp.MustCompile(`^(\S+): async event FD (\d+)$`)

// watcher is an ibv_asyncwatch-style program (the C tool, or our
// cmd/asyncwatch) running as a peer.
type watcher struct {
	t *testing.T
	p *testkit.Peer
}

// startWatcher starts name -d rxe0 and returns once it printed its header,
// which it does right after opening the device, so from then on it sees
// every event.
func startWatcher(ctx context.Context, t *testing.T, name string, args ...string) *watcher {
	t.Helper()
	p := testkit.StartPeer(ctx, t, name, args...)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.WaitForOutput(wctx, "async event FD "); err != nil {
		t.Fatalf("%s did not open the device: %v", name, err)
	}
	w := &watcher{t: t, p: p}
	if h := w.header(); !headerRE.MatchString(h) {
		t.Fatalf("%s header %q does not read \"DEV: async event FD N\"", name, h)
	}
	return w
}

func (w *watcher) header() string {
	h, _, _ := strings.Cut(w.p.Output(), "\n")
	return h
}

// lines returns the complete event lines printed so far.
func (w *watcher) lines() []string {
	out := w.p.Output()
	var ls []string
	for {
		line, rest, ok := strings.Cut(out, "\n")
		if !ok {
			break // an unfinished line, or nothing
		}
		if strings.HasPrefix(line, eventPrefix) {
			ls = append(ls, line)
		}
		out = rest
	}
	return ls
}

// waitLines waits until the watcher printed at least n event lines.
func (w *watcher) waitLines(ctx context.Context, n int) error {
	for {
		cur := w.p.Output()
		if len(w.lines()) >= n {
			return nil
		}
		var err error
		if strings.HasSuffix(cur, "\n") || cur == "" {
			// Output only grows: this returns once another line starts.
			err = w.p.WaitForOutput(ctx, cur+eventPrefix)
		} else {
			// The pty delivered part of a line; the rest follows at once.
			tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			<-tctx.Done()
			cancel()
			err = ctx.Err()
		}
		if err != nil {
			if len(w.lines()) >= n {
				return nil
			}
			return fmt.Errorf("waiting for %d event lines: %w", n, err)
		}
	}
}

// quiet reports whether the watcher prints no further event line within d.
func (w *watcher) quiet(ctx context.Context, d time.Duration) bool {
	cur := w.p.Output()
	qctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return w.p.WaitForOutput(qctx, cur+eventPrefix) != nil && ctx.Err() == nil
}

// restoreNet puts d0 back the way the VM set it up, whatever a failed test
// left behind. Errors are ignored: most of these are no-ops.
func restoreNet(t *testing.T, cidrs ...string) {
	t.Cleanup(func() {
		for _, c := range cidrs {
			exec.Command("ip", "addr", "del", c, "dev", testkit.RxeNetdev).Run()
		}
		exec.Command("ip", "link", "set", "dev", testkit.RxeNetdev, "up").Run()
	})
}

var ipIsIproute2 = sync.OnceValue(func() bool {
	out, _ := exec.Command("ip", "-V").CombinedOutput()
	return strings.Contains(string(out), "iproute2")
})

// addAddr is testkit.AddAddr, except for IPv6 when the guest's ip is
// busybox's, which rejects "nodad": then the address is added without it.
// d0 is a dummy device (IFF_NOARP), for which the kernel skips duplicate
// address detection anyway, so the GID appears at once either way.
func addAddr(t *testing.T, cidr string) {
	t.Helper()
	if !strings.Contains(cidr, ":") || ipIsIproute2() {
		testkit.AddAddr(t, testkit.RxeNetdev, cidr)
		return
	}
	out, err := exec.Command("ip", "addr", "add", cidr, "dev", testkit.RxeNetdev).CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr add %s dev %s: %v\n%s", cidr, testkit.RxeNetdev, err, out)
	}
}

func openReader(t *testing.T) (*uverbs.Context, *async.Reader) {
	t.Helper()
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// line is how ibv_asyncwatch prints ev (port events only: for those the
// C tool's "port %d" is the port number).
func line(ev async.Event) string { return eventPrefix + ev.String() }

// getAck gets one event within d and acknowledges it.
func getAck(ctx context.Context, t *testing.T, r *async.Reader, d time.Duration) async.Event {
	t.Helper()
	gctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ev, err := r.Get(gctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := r.Ack(ev); err != nil {
		t.Fatalf("Ack(%v): %v", ev, err)
	}
	return ev
}

func diffLines(got, want []string) string {
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := " "
		if g != w {
			mark = "!"
		}
		fmt.Fprintf(&b, "%s %2d ours %-50q C %q\n", mark, i, g, w)
	}
	return b.String()
}

type trigger struct {
	name string
	do   func(t *testing.T)
}

const (
	testV4 = "10.99.1.5/24"
	testV6 = "fd00:99::5/64"
)

// portAndGIDTriggers flap d0 and add and remove an IPv4 and an IPv6
// address: PORT_ERR, PORT_ACTIVE, then GID_CHANGE events.
func portAndGIDTriggers() []trigger {
	return []trigger{
		{"link down", func(t *testing.T) { testkit.SetLink(t, testkit.RxeNetdev, false) }},
		{"link up", func(t *testing.T) { testkit.SetLink(t, testkit.RxeNetdev, true) }},
		{"add " + testV4, func(t *testing.T) { addAddr(t, testV4) }},
		{"add " + testV6, func(t *testing.T) { addAddr(t, testV6) }},
		{"del " + testV4, func(t *testing.T) { testkit.DelAddr(t, testkit.RxeNetdev, testV4) }},
		{"del " + testV6, func(t *testing.T) { testkit.DelAddr(t, testkit.RxeNetdev, testV6) }},
	}
}

// TestVMPortEvents checks that our Reader and ibv_asyncwatch, on the same
// device at the same time, see the same events in the same order, and that
// every event is delivered once and acknowledged.
func TestVMPortEvents(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restoreNet(t, testV4, testV6)

	_, r := openReader(t)
	c := startWatcher(ctx, t, "ibv_asyncwatch", "-d", testkit.RxeDev)
	if h := c.header(); !strings.HasPrefix(h, testkit.RxeDev+": ") {
		t.Fatalf("ibv_asyncwatch header %q, want device %s", h, testkit.RxeDev)
	}
	if _, err := r.TryGet(); !errors.Is(err, async.ErrNoEvent) {
		t.Fatalf("TryGet before any trigger = %v, want ErrNoEvent", err)
	}

	var ours []async.Event
	var oursLines []string
	take := func(d time.Duration) {
		ev := getAck(ctx, t, r, d)
		ours = append(ours, ev)
		oursLines = append(oursLines, line(ev))
	}
	// catchUp gets events until we have as many as the C tool printed, and
	// waits until it printed as many as we got.
	catchUp := func() {
		for {
			for len(ours) < len(c.lines()) {
				take(30 * time.Second)
			}
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			err := c.waitLines(wctx, len(ours))
			wcancel()
			if err != nil {
				t.Fatalf("ibv_asyncwatch did not report the events we got: %v\n%s", err, diffLines(oursLines, c.lines()))
			}
			if len(c.lines()) == len(ours) {
				return
			}
		}
	}
	for _, tr := range portAndGIDTriggers() {
		before := len(ours)
		tr.do(t)
		take(30 * time.Second) // every trigger raises at least one event
		catchUp()
		t.Logf("%-22s -> %s", tr.name, strings.Join(oursLines[before:], " | "))
	}
	// After the last trigger: both must stop at the same count.
	for !c.quiet(ctx, 2*time.Second) || len(c.lines()) != len(ours) {
		catchUp()
	}
	cLines := c.lines()
	if strings.Join(oursLines, "\n") != strings.Join(cLines, "\n") {
		t.Fatalf("our events differ from ibv_asyncwatch's:\n%s", diffLines(oursLines, cLines))
	}
	// The shape the kernel gives: PORT_ERR, PORT_ACTIVE, then GID changes
	// (as many as the C tool saw).
	if len(ours) < 6 || ours[0].Type != async.PortErr || ours[1].Type != async.PortActive {
		t.Fatalf("sequence %v: want PORT_ERR, PORT_ACTIVE, GID_CHANGE...", oursLines)
	}
	for _, ev := range ours {
		if ev.Type.Element() == uverbs.ElementPort && (ev.Port != 1 || ev.Raw != 1 || ev.Element != nil) {
			t.Errorf("%v: Port %d Raw %d Element %v, want port 1, raw 1, no element", ev, ev.Port, ev.Raw, ev.Element)
		}
	}
	for _, ev := range ours[2:] {
		if ev.Type != async.GIDChange {
			t.Errorf("event %v after the link flap, want only GID_CHANGE", ev)
		}
	}
	if n := r.Unacked(); n != 0 {
		t.Errorf("Unacked = %d after acking every event", n)
	}
	if err := r.Ack(ours[0]); !errors.Is(err, async.ErrAlreadyAcked) {
		t.Errorf("second Ack = %v, want ErrAlreadyAcked", err)
	}
	if ev, err := r.TryGet(); !errors.Is(err, async.ErrNoEvent) || !errors.Is(err, sys.EAGAIN) {
		t.Errorf("TryGet after the last event = %v, %v; want ErrNoEvent (matching EAGAIN)", ev, err)
	}
	t.Logf("%d events, same as ibv_asyncwatch:\n%s", len(ours), strings.Join(oursLines, "\n"))
}

// TestVMGetCancelAndClose covers the ways Get ends without an event, and
// reading through the caller's own loop on Fd with TryGet.
func TestVMGetCancelAndClose(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("context", func(t *testing.T) {
		_, r := openReader(t)
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if ev, err := r.Get(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Get(cancelled) = %v, %v; want context.Canceled", ev, err)
		}
		start := time.Now() // before the deadline is set: it lies 100ms after
		dctx, dcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer dcancel()
		if ev, err := r.Get(dctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Get(100ms) = %v, %v; want context.DeadlineExceeded", ev, err)
		}
		if el := time.Since(start); el < 100*time.Millisecond || el > 10*time.Second {
			t.Errorf("Get(100ms) returned after %v", el)
		}
		if n := r.Unacked(); n != 0 {
			t.Errorf("Unacked = %d", n)
		}
	})

	t.Run("close", func(t *testing.T) {
		c, r := openReader(t)
		const n = 3
		errs := make(chan error, n)
		for range n {
			go func() {
				_, err := r.Get(ctx)
				errs <- err
			}()
		}
		// No event is due: the Gets must still be blocked.
		bctx, bcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		select {
		case err := <-errs:
			t.Fatalf("Get returned %v with no event queued", err)
		case <-bctx.Done():
		}
		bcancel()
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for range n {
			select {
			case err := <-errs:
				if !errors.Is(err, uverbs.ErrClosed) {
					t.Errorf("blocked Get after Close = %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not wake a blocked Get within 10s")
			}
		}
		if _, err := r.Get(ctx); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("Get after Close = %v, want ErrClosed", err)
		}
		if _, err := r.TryGet(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("TryGet after Close = %v, want ErrClosed", err)
		}
		if _, err := async.NewReader(c); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("NewReader on a closed Context = %v, want ErrClosed", err)
		}
	})

	t.Run("fd", func(t *testing.T) {
		restoreNet(t)
		_, r := openReader(t)
		fd := r.Fd()
		if fd < 0 {
			t.Fatalf("Fd = %d", fd)
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err != nil || !strings.HasPrefix(link, "anon_inode:") {
			t.Fatalf("Fd %d is %q (%v), want the anon inode event file", fd, link, err)
		}
		if nb, err := sys.IsNonblock(fd); err != nil || !nb {
			t.Errorf("Fd %d non-blocking = %v (%v), want true", fd, nb, err)
		}
		t.Logf("Fd %d -> %s", fd, link)
		if _, err := r.TryGet(); !errors.Is(err, async.ErrNoEvent) {
			t.Fatalf("TryGet with nothing queued = %v, want ErrNoEvent", err)
		}
		c := startWatcher(ctx, t, "ibv_asyncwatch", "-d", testkit.RxeDev)
		testkit.SetLink(t, testkit.RxeNetdev, false)
		testkit.SetLink(t, testkit.RxeNetdev, true)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		if err := c.waitLines(wctx, 2); err != nil {
			t.Fatal(err)
		}
		// The kernel queues each event on every open async file in one
		// pass, so ours are (all but) there: collect them with TryGet
		// only, as a caller polling Fd itself would.
		var got []string
		for len(got) < 2 {
			ev, err := r.TryGet()
			if errors.Is(err, async.ErrNoEvent) {
				if wctx.Err() != nil {
					t.Fatalf("TryGet: only %v before the deadline; ibv_asyncwatch saw %v", got, c.lines())
				}
				tctx, tcancel := context.WithTimeout(wctx, time.Millisecond)
				<-tctx.Done()
				tcancel()
				continue
			}
			if err != nil {
				t.Fatalf("TryGet: %v", err)
			}
			if err := r.Ack(ev); err != nil {
				t.Fatal(err)
			}
			got = append(got, line(ev))
		}
		if !c.quiet(ctx, time.Second) {
			t.Fatalf("ibv_asyncwatch kept printing: %v", c.lines())
		}
		if want := c.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("TryGet after the flap:\n%s", diffLines(got, want))
		}
		if _, err := r.TryGet(); !errors.Is(err, async.ErrNoEvent) {
			t.Errorf("TryGet after draining = %v, want ErrNoEvent", err)
		}
		if n := r.Unacked(); n != 0 {
			t.Errorf("Unacked = %d", n)
		}
	})
}

// TestVMConcurrentGet has several goroutines in Get while the link flaps:
// each event must reach exactly one of them, and the total must be what
// ibv_asyncwatch saw.
func TestVMConcurrentGet(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restoreNet(t)
	_, r := openReader(t)
	c := startWatcher(ctx, t, "ibv_asyncwatch", "-d", testkit.RxeDev)

	const workers, flaps = 4, 3
	type got struct {
		worker int
		ev     async.Event
	}
	ch := make(chan got, 64)
	gctx, gcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ackErrs := make(chan error, 64)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := r.Get(gctx)
				if err != nil {
					if gctx.Err() == nil {
						ackErrs <- fmt.Errorf("worker %d: Get: %w", w, err)
					}
					return
				}
				if err := r.Ack(ev); err != nil {
					ackErrs <- fmt.Errorf("worker %d: Ack: %w", w, err)
				}
				ch <- got{w, ev}
			}
		}()
	}
	var all []got
	perWorker := make([]int, workers)
	recv := func(d time.Duration) bool {
		t.Helper()
		select {
		case g := <-ch:
			all = append(all, g)
			perWorker[g.worker]++
			return true
		case err := <-ackErrs:
			t.Fatal(err)
		case <-time.After(d):
		}
		return false
	}
	// Flap back to back, so that events queue up while several workers
	// wait, then wait for the C tool to see them all.
	for range flaps {
		testkit.SetLink(t, testkit.RxeNetdev, false)
		testkit.SetLink(t, testkit.RxeNetdev, true)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	err := c.waitLines(wctx, 2*flaps)
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	// Collect until we have what the C tool has and it has stopped.
	for {
		for len(all) < len(c.lines()) {
			if !recv(30 * time.Second) {
				t.Fatalf("got %d events, ibv_asyncwatch %d", len(all), len(c.lines()))
			}
		}
		if c.quiet(ctx, 2*time.Second) && len(c.lines()) == len(all) {
			break
		}
		if len(all) > len(c.lines()) {
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			err := c.waitLines(wctx, len(all))
			wcancel()
			if err != nil {
				t.Fatalf("we got more events than ibv_asyncwatch: %v", err)
			}
		}
	}
	// Nothing more may come to any worker.
	if recv(500 * time.Millisecond) {
		t.Fatalf("extra event %v after ibv_asyncwatch stopped at %d", all[len(all)-1].ev, len(c.lines()))
	}
	gcancel()
	wg.Wait()
	close(ackErrs)
	for err := range ackErrs {
		t.Error(err)
	}

	count := func(ls []string) map[string]int {
		m := map[string]int{}
		for _, l := range ls {
			m[l]++
		}
		return m
	}
	var ours []string
	for _, g := range all {
		ours = append(ours, line(g.ev))
	}
	cl := c.lines()
	if len(ours) != len(cl) || fmt.Sprint(count(ours)) != fmt.Sprint(count(cl)) {
		t.Fatalf("events: ours %v, ibv_asyncwatch %v", count(ours), count(cl))
	}
	if len(cl) != 2*flaps {
		t.Logf("note: ibv_asyncwatch saw %d events for %d flaps", len(cl), flaps)
	}
	if n := r.Unacked(); n != 0 {
		t.Errorf("Unacked = %d", n)
	}
	t.Logf("%d events over %d goroutines %v, same multiset as ibv_asyncwatch: %v", len(all), workers, perWorker, count(cl))
}

// TestVMAsyncwatchTool runs our cmd/asyncwatch binary beside the C
// ibv_asyncwatch and compares what they print. rxevm installs the cmd tools
// in the guest for -demo and -shell-cmd runs; cmd/asyncwatch's own VM test
// (TestVMRunBesideC) does the same through run() in every test run.
func TestVMAsyncwatchTool(t *testing.T) {
	testkit.RequireVM(t)
	if _, err := exec.LookPath("asyncwatch"); err != nil {
		t.Skip("asyncwatch is not installed in this guest (rxevm installs cmd tools only for -demo/-shell-cmd); cmd/asyncwatch's TestVMRunBesideC covers it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restoreNet(t, testV4, testV6)
	c := startWatcher(ctx, t, "ibv_asyncwatch", "-d", testkit.RxeDev)
	g := startWatcher(ctx, t, "asyncwatch", "-d", testkit.RxeDev)
	for _, tr := range portAndGIDTriggers() {
		n := len(c.lines())
		tr.do(t)
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.waitLines(wctx, n+1)
		wcancel()
		if err != nil {
			t.Fatalf("%s: %v", tr.name, err)
		}
	}
	for !c.quiet(ctx, 2*time.Second) {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := g.waitLines(wctx, len(c.lines())); err != nil {
		t.Fatal(err)
	}
	if !g.quiet(ctx, time.Second) {
		t.Fatalf("asyncwatch kept printing: %v", g.lines())
	}
	g.p.Stop()
	// Killed by it, as ibv_asyncwatch is (cmd/asyncwatch TestVMSignalEnds).
	if err := g.p.Wait(); err == nil || !strings.HasSuffix(err.Error(), "signal: interrupt") {
		t.Errorf("asyncwatch after SIGINT: %v, want killed by it (signal: interrupt)", err)
	}
	if a, b := strings.Join(g.lines(), "\n"), strings.Join(c.lines(), "\n"); a != b {
		t.Fatalf("asyncwatch vs ibv_asyncwatch:\n%s", diffLines(g.lines(), c.lines()))
	}
	// Headers agree but for the descriptor number, which is per process.
	hg, hc := headerRE.FindStringSubmatch(g.header()), headerRE.FindStringSubmatch(c.header())
	if hg[1] != hc[1] {
		t.Errorf("headers %q and %q name different devices", g.header(), c.header())
	}
	t.Logf("asyncwatch and ibv_asyncwatch both printed:\n%s\n%s", g.header(), strings.Join(g.lines(), "\n"))
}
