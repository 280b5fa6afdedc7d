package cq_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"
)

func open(t *testing.T) *uverbs.Context {
	t.Helper()
	testkit.RequireVM(t)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// connect drives qp RESET→RTS towards remote QPN dest on rxe0's GID 1.
func connect(t *testing.T, c *uverbs.Context, qp *uverbs.QP, dest uint32) {
	t.Helper()
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Retry count 7: rxe never counts it down; these QPs never fail.
	if err := rcstream.Connect(qp, dest, g.GID, 1, 1, rcstream.Timers{Timeout: 14, Retry: 7}); err != nil {
		t.Fatal(err)
	}
}

// end is one side of a connection: a QP whose sends and receives complete
// on one cq.CQ, and a registered buffer of recv slots and send slots.
type end struct {
	qp   *uverbs.QP
	q    *cq.CQ
	mr   *uverbs.MR
	buf  []byte
	slot int
	recv int // number of receive slots
}

func newEnd(t *testing.T, c *uverbs.Context, pd *uverbs.PD, opts *cq.Options, depth, slot int) *end {
	t.Helper()
	q, err := cq.New(c, 4*depth, opts)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: q.Verbs(), RecvCQ: q.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e := &end{qp: qp, q: q, buf: make([]byte, 2*depth*slot), slot: slot, recv: depth}
	if e.mr, err = pd.RegMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		qp.Destroy(ctx)
		q.Close(ctx)
		e.mr.Dereg()
	})
	return e
}

// selfPair is a shared channel with two ends on it, a and b, each QP
// connected to itself.
func selfPair(t *testing.T) (*cq.Channel, *end, *end) {
	t.Helper()
	c, pd, ch := sharedChannel(t)
	a := newEnd(t, c, pd, &cq.Options{Channel: ch}, 8, 64)
	b := newEnd(t, c, pd, &cq.Options{Channel: ch}, 8, 64)
	connect(t, c, a.qp, a.qp.QPN())
	connect(t, c, b.qp, b.qp.QPN())
	return ch, a, b
}

// sendToSelf posts a receive and a signaled send on e's QP, connected to
// itself: two completions on e's CQ.
func (e *end) sendToSelf(t *testing.T) {
	t.Helper()
	if err := e.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: e.sge(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: e.sge(9)}}); err != nil {
		t.Fatal(err)
	}
}

func (e *end) sge(i int) []uverbs.SGE {
	return []uverbs.SGE{{Addr: e.mr.Addr() + uint64(i*e.slot), Length: uint32(e.slot), LKey: e.mr.LKey()}}
}

// stream sends n numbered messages to the peer while receiving n from it,
// driven only by Wait and GetWC: sends are kept window deep, every
// receive is checked (in order, each once) and reposted.
func (e *end) stream(ctx context.Context, n, window int) error {
	rwr := make([]uverbs.RecvWR, 1)
	for i := 0; i < e.recv; i++ {
		rwr[0] = uverbs.RecvWR{ID: uint64(i), SGL: e.sge(i)}
		if err := e.qp.PostRecv(rwr); err != nil {
			return err
		}
	}
	swr := make([]uverbs.SendWR, 1)
	wcs := make([]uverbs.WC, 32)
	sent, acked, received := 0, 0, 0
	for acked < n || received < n {
		for sent < n && sent-acked < window {
			s := e.recv + sent%e.recv
			binary.LittleEndian.PutUint64(e.buf[s*e.slot:], uint64(sent))
			swr[0] = uverbs.SendWR{ID: 1 << 40, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: e.sge(s)}
			if err := e.qp.PostSend(swr); err != nil {
				return err
			}
			sent++
		}
		k, err := e.q.GetWC(wcs)
		if err != nil {
			return err
		}
		if k == 0 {
			if err := e.q.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		for _, wc := range wcs[:k] {
			if wc.Status != uverbs.WCSuccess {
				return errors.New(wc.Status.String())
			}
			if wc.Opcode == uverbs.WCSend {
				acked++
				continue
			}
			i := int(wc.ID)
			if got := binary.LittleEndian.Uint64(e.buf[i*e.slot:]); got != uint64(received) {
				return errors.New("message out of order or repeated")
			}
			received++
			rwr[0] = uverbs.RecvWR{ID: uint64(i), SGL: e.sge(i)}
			if err := e.qp.PostRecv(rwr); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestVMStreamWaitGetWC: 100,000 messages each way between two QPs, both
// sides driven only by Wait and GetWC: every completion is seen once, in
// order. A Wait that slept past a ready completion (the re-arm race)
// would hang here until the context ends.
func TestVMStreamWaitGetWC(t *testing.T) {
	for _, mode := range []struct {
		name   string
		thread bool
		n      int
	}{{"poller", false, 100000}, {"thread", true, 5000}} {
		t.Run(mode.name, func(t *testing.T) {
			c := open(t)
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			defer pd.Dealloc()
			n := mode.n
			if testing.Short() {
				n /= 10
			}
			opts := &cq.Options{WaitThread: mode.thread}
			a := newEnd(t, c, pd, opts, 128, 64)
			b := newEnd(t, c, pd, opts, 128, 64)
			connect(t, c, a.qp, b.qp.QPN())
			connect(t, c, b.qp, a.qp.QPN())
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, e := range []*end{a, b} {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = e.stream(ctx, n, 32) }()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
			}
			t.Logf("%s waits: %d messages each way in %v", mode.name, n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestVMFdUserEpoll: a user's own epoll loop on Fd: readable once a
// completion is ready; consuming it with GetWC without Wait makes the next
// Wait return at once for the already consumed completion, harmlessly
// (the rpma_cq_get_fd(3) note).
func TestVMFdUserEpoll(t *testing.T) {
	c := open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	a := newEnd(t, c, pd, nil, 8, 64)
	b := newEnd(t, c, pd, nil, 8, 64)
	connect(t, c, a.qp, b.qp.QPN())
	connect(t, c, b.qp, a.qp.QPN())
	fd, err := b.q.Fd()
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := sys.IsNonblock(fd); !ok {
		t.Fatal("Fd is not in non-blocking mode as documented")
	}
	if ok, _ := testkit.EpollReadable(fd, 20*time.Millisecond); ok {
		t.Fatal("readable with nothing completed")
	}
	if err := b.qp.PostRecv([]uverbs.RecvWR{{ID: 0, SGL: b.sge(0)}}); err != nil {
		t.Fatal(err)
	}
	if err := a.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: a.sge(9)}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := testkit.EpollReadable(fd, 5*time.Second); !ok || err != nil {
		t.Fatalf("epoll: %v %v", ok, err)
	}
	wcs := make([]uverbs.WC, 4)
	if n, err := b.q.GetWC(wcs); n != 1 || err != nil || wcs[0].Opcode != uverbs.WCRecv {
		t.Fatalf("GetWC after epoll = %d %v %+v", n, err, wcs[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := b.q.Wait(ctx); err != nil {
		t.Fatalf("Wait for the already consumed completion = %v", err)
	}
	if n, _ := b.q.GetWC(wcs); n != 0 {
		t.Fatalf("GetWC found %d after the spurious Wait", n)
	}
	// Nothing more is ready: the next Wait blocks until its context ends.
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if err := b.q.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with nothing to come = %v", err)
	}
	var nilCQ *cq.CQ
	if _, err := nilCQ.Fd(); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("nil Fd = %v", err)
	}
	if _, err := nilCQ.GetWC(wcs); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("nil GetWC = %v", err)
	}
	if err := nilCQ.Wait(ctx); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("nil Wait = %v", err)
	}
}

// TestVMFdEdgeTriggered: the seed's loop on an edge-triggered epoll
// (as the Go runtime's poller is): readable, Wait, GetWC, three times
// over. Wait must read the queued event and re-arm even though the
// completion is already waiting: it once returned early on Ready, which
// left the event queued (Fd readable for nothing) and the CQ disarmed,
// so the second round's completion raised no edge and the loop hung.
func TestVMFdEdgeTriggered(t *testing.T) {
	c := open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	a := newEnd(t, c, pd, nil, 8, 64)
	b := newEnd(t, c, pd, nil, 8, 64)
	connect(t, c, a.qp, b.qp.QPN())
	connect(t, c, b.qp, a.qp.QPN())
	fd, err := b.q.Fd()
	if err != nil {
		t.Fatal(err)
	}
	w, err := testkit.NewEdgeWatch(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	edge := func(timeout time.Duration) bool {
		ok, err := w.Wait(timeout)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wcs := make([]uverbs.WC, 4)
	for round := range 3 {
		if err := b.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(round), SGL: b.sge(0)}}); err != nil {
			t.Fatal(err)
		}
		if err := a.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: a.sge(9)}}); err != nil {
			t.Fatal(err)
		}
		if !edge(5 * time.Second) {
			t.Fatalf("round %d: no edge on Fd within 5 s of the completion", round)
		}
		if err := b.q.Wait(ctx); err != nil {
			t.Fatalf("round %d: Wait = %v", round, err)
		}
		if n, err := b.q.GetWC(wcs); n != 1 || err != nil || wcs[0].ID != uint64(round) {
			t.Fatalf("round %d: GetWC = %d %v %+v", round, n, err, wcs[0])
		}
		if ok, err := testkit.EpollReadable(fd, 0); ok || err != nil {
			t.Fatalf("round %d: Fd still readable after Wait and GetWC (%v): the event was left unread", round, err)
		}
	}
}

// TestVMSharedChannelWait: a connection's send CQ, its receive CQ and an
// SRQ's receive CQ share one channel; Channel.Wait reports each CQ that
// completes, and per-CQ Waits on the shared channel each wake for their
// own CQ.
func TestVMSharedChannelWait(t *testing.T) {
	c := open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	ch, err := cq.NewChannel(c)
	if err != nil {
		t.Fatal(err)
	}
	scq, err := cq.New(c, 16, &cq.Options{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := cq.New(c, 16, &cq.Options{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: scq.Verbs(), RecvCQ: rcq.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, c, qp, qp.QPN())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wcs := make([]uverbs.WC, 4)
	for round := 0; round < 10; round++ {
		qp.PostRecv([]uverbs.RecvWR{{ID: 1}})
		qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}})
		seen := map[*cq.CQ]bool{}
		for len(seen) < 2 {
			q, err := ch.Wait(ctx)
			if err != nil {
				t.Fatalf("round %d: Channel.Wait: %v", round, err)
			}
			n, _ := q.GetWC(wcs)
			if n > 0 {
				if (q == scq) != (wcs[0].Opcode == uverbs.WCSend) {
					t.Fatalf("round %d: %v completion on the other CQ", round, wcs[0].Opcode)
				}
				seen[q] = true
			}
		}
	}
	// Per-CQ Waits: two goroutines, each waits on its own CQ of the
	// shared channel; whichever reads an event hands the other's over.
	for round := 0; round < 10; round++ {
		var wg sync.WaitGroup
		for _, q := range []*cq.CQ{scq, rcq} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]uverbs.WC, 4)
				for {
					if n, _ := q.GetWC(buf); n > 0 {
						return
					}
					if err := q.Wait(ctx); err != nil {
						t.Errorf("Wait: %v", err)
						return
					}
				}
			}()
		}
		qp.PostRecv([]uverbs.RecvWR{{ID: 1}})
		qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}})
		wg.Wait()
	}
	qp.Destroy(ctx)
	if err := ch.Close(); !errors.Is(err, sys.EBUSY) {
		t.Fatalf("shared channel Close with CQs = %v", err)
	}
	scq.Close(ctx)
	rcq.Close(ctx)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestVMWaitCloseUnblocks: Context.Close while a goroutine is blocked in
// Wait unblocks it with an error matching ErrClosed; nothing leaks.
func TestVMWaitCloseUnblocks(t *testing.T) {
	for _, thread := range []bool{false, true} {
		t.Run(map[bool]string{false: "poller", true: "thread"}[thread], func(t *testing.T) { waitCloseUnblocks(t, thread) })
	}
}

func waitCloseUnblocks(t *testing.T, thread bool) {
	testkit.RequireVM(t) // and a LeakCheck of its own: goroutines, fds, mappings, kernel objects
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	q, err := cq.New(c, 8, &cq.Options{WaitThread: thread})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- q.Wait(context.Background()) }()
	testkit.MustBlock(t, "cq.(*CQ).Wait") // Close wakes a wait that has begun
	select {
	case err := <-done:
		t.Fatalf("Wait returned with nothing to wait for: %v", err)
	default:
	}
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("Wait across Close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still blocked after Close")
	}
	if err := q.Wait(context.Background()); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Wait after Close = %v", err)
	}
	if _, err := q.Fd(); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Fd after Close = %v", err)
	}
	if f := sys.OpenFDs(); len(f) != 0 {
		t.Fatalf("fds left: %v", f)
	}
	// The goroutine that waited, the kernel's ctx and cq, the rings'
	// mappings: RequireVM's LeakCheck waits for them to go and fails the
	// test if they do not. (A count of goroutines taken here failed when
	// this was the process's first test to map a ring: internal/sys's
	// returner starts then and stays, which LeakCheck knows.)
}

// TestVMWaitGetWCNoAllocs: a round of waiting for a real completion
// event and GetWC allocates nothing, waiting with the CQ's Wait on its own
// channel or with Channel.Wait on a shared one (which also looks again at
// the CQ it returned).
func TestVMWaitGetWCNoAllocs(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "CQ.Wait", true: "Channel.Wait"}[shared]
		t.Run(name, func(t *testing.T) {
			c, pd, ch := sharedChannel(t)
			var opts *cq.Options
			if shared {
				opts = &cq.Options{Channel: ch}
			}
			a := newEnd(t, c, pd, opts, 8, 64)
			connect(t, c, a.qp, a.qp.QPN())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rwr := []uverbs.RecvWR{{ID: 0, SGL: a.sge(0)}}
			swr := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: a.sge(9)}}
			wcs := make([]uverbs.WC, 1)
			testkit.NoAllocs(t, 300, func() {
				a.qp.PostRecv(rwr)
				a.qp.PostSend(swr)
				for got := 0; got < 2; {
					q := a.q
					if shared {
						var err error
						if q, err = ch.Wait(ctx); err != nil {
							t.Fatal(err)
						}
					}
					n, err := q.GetWC(wcs)
					if err != nil {
						t.Fatal(err)
					}
					got += n
					if n == 0 && !shared {
						if err := q.Wait(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
			})
		})
	}
}

// TestVMChannelWaitLongRecheck: with 20 CQs on the recheck list, all
// holding completions the application leaves there, Channel.Wait hands
// them out in turn (each goes to the end of the list) and allocates
// nothing, however long the list (it copied the list into a 16-entry
// array, which a longer list outgrew on every call).
func TestVMChannelWaitLongRecheck(t *testing.T) {
	c, pd, ch := sharedChannel(t)
	const n = 20
	ends := make([]*end, n)
	for i := range ends {
		e := newEnd(t, c, pd, &cq.Options{Channel: ch}, 2, 64)
		connect(t, c, e.qp, e.qp.QPN())
		e.sendToSelf(t)
		ends[i] = e
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, e := range ends {
		for {
			k, err := e.q.Verbs().Ready()
			if err != nil {
				t.Fatal(err)
			}
			if k == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a loopback send and receive made %d completions in 10s", k)
			}
			runtime.Gosched()
		}
		e.q.MarkRecheckForTest()
	}
	if k := cq.RecheckLenForTest(ch); k != n {
		t.Fatalf("recheck list of %d CQs, want %d", k, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[*cq.CQ]int{}
	for range 2 * n {
		q, err := ch.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[q]++
	}
	for i, e := range ends {
		if seen[e.q] != 2 {
			t.Errorf("CQ %d returned %d times in %d Waits, want 2 (in turn)", i, seen[e.q], 2*n)
		}
	}
	testkit.NoAllocs(t, 100, func() {
		if _, err := ch.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if k := cq.RecheckLenForTest(ch); k != n {
		t.Errorf("recheck list of %d CQs after the Waits, want %d", k, n)
	}
}

// TestVMAllIterator: ranging over All yields every completion once, Waits
// in between, and ends quietly when its context is cancelled.
func TestVMAllIterator(t *testing.T) {
	c := open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	a := newEnd(t, c, pd, nil, 64, 64)
	connect(t, c, a.qp, a.qp.QPN())
	const n = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	posted := make(chan int, n)
	go func() {
		for i := 0; i < n; i++ {
			<-posted // one message in flight at a time keeps the queues small
			a.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(i), SGL: a.sge(0)}})
			a.qp.PostSend([]uverbs.SendWR{{ID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: a.sge(9)}})
		}
	}()
	posted <- 0
	sends, recvs := 0, 0
	for wc, err := range a.q.All(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("completion %+v", wc)
		}
		if wc.Opcode == uverbs.WCSend {
			sends++
		} else {
			recvs++
		}
		if sends == recvs && sends < n {
			posted <- sends
		}
		if sends == n && recvs == n {
			cancel()
		}
	}
	if sends != n || recvs != n {
		t.Fatalf("%d sends, %d recvs", sends, recvs)
	}
}

// TestVMChannelWaitPartialPoll: completions that are all queued before
// Channel.Wait reads their one event, then polled one per Wait, are each
// reported: Wait looks again at the CQ it returned (no event announces the
// rest). Once the CQ is empty Wait blocks until its context ends rather
// than report it again.
func TestVMChannelWaitPartialPoll(t *testing.T) {
	c, pd, ch := sharedChannel(t)
	// Other CQs on the channel, armed and idle, that Wait must not need
	// to look at.
	idleCQs(t, c, ch, 50)
	const msgs = 8
	a := newEnd(t, c, pd, &cq.Options{Channel: ch}, msgs, 64)
	connect(t, c, a.qp, a.qp.QPN())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range msgs {
		if err := a.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(i), SGL: a.sge(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range msgs {
		if err := a.qp.PostSend([]uverbs.SendWR{{ID: 100 + uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: a.sge(msgs + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// All 2*msgs completions land before the first Wait.
	for {
		n, err := a.q.Verbs().Ready()
		if err != nil {
			t.Fatal(err)
		}
		if n >= 2*msgs {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d completions arrived", n, 2*msgs)
		}
		runtime.Gosched()
	}
	wc := make([]uverbs.WC, 1)
	seen := map[uint64]bool{}
	for len(seen) < 2*msgs {
		q, err := ch.Wait(ctx)
		if err != nil {
			t.Fatalf("Wait after %d of %d completions: %v", len(seen), 2*msgs, err)
		}
		if q != a.q {
			t.Fatalf("Wait returned an idle CQ")
		}
		n, err := q.GetWC(wc)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if wc[0].Status != uverbs.WCSuccess || seen[wc[0].ID] {
				t.Fatalf("completion %+v (seen %v)", wc[0], seen[wc[0].ID])
			}
			seen[wc[0].ID] = true
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	if q, err := ch.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on drained CQs = %p, %v; want context.DeadlineExceeded", q, err)
	}
}

// TestVMChannelWaitConcurrent: several goroutines call Channel.Wait on one
// channel of many CQs while traffic flows on some of them; every
// completion is polled exactly once and no waiter is left behind.
func TestVMChannelWaitConcurrent(t *testing.T) {
	c, pd, ch := sharedChannel(t)
	const ends, depth, rounds, waiters = 4, 8, 200, 3
	var es []*end
	for range ends {
		e := newEnd(t, c, pd, &cq.Options{Channel: ch}, depth, 64)
		connect(t, c, e.qp, e.qp.QPN())
		es = append(es, e)
	}
	idleCQs(t, c, ch, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Each round every end posts one receive and one send; the waiters
	// count the completions of each end.
	var mu sync.Mutex
	got := make(map[*cq.CQ]int)
	want := 2 * rounds
	done := make(chan struct{})
	var wg sync.WaitGroup
	stop := sync.OnceFunc(func() {
		close(done)
		cancel()
		wg.Wait()
	})
	defer stop()
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wcs := make([]uverbs.WC, 3)
			for {
				q, err := ch.Wait(ctx)
				if err != nil {
					select {
					case <-done:
					default:
						t.Errorf("Wait: %v", err)
					}
					return
				}
				for {
					n, err := q.GetWC(wcs)
					if err != nil {
						t.Error(err)
						return
					}
					if n == 0 {
						break
					}
					mu.Lock()
					got[q] += n
					mu.Unlock()
					for _, wc := range wcs[:n] {
						if wc.Status != uverbs.WCSuccess {
							t.Errorf("status %v", wc.Status)
						}
					}
				}
			}
		}()
	}
	total := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range es {
			n += got[e.q]
		}
		return n
	}
	for r := range rounds {
		for _, e := range es {
			if err := e.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(r), SGL: e.sge(r % depth)}}); err != nil {
				t.Fatal(err)
			}
			if err := e.qp.PostSend([]uverbs.SendWR{{ID: uint64(r), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: e.sge(depth + r%depth)}}); err != nil {
				t.Fatal(err)
			}
		}
		// Keep the queues from overflowing: wait for this round.
		for total() < 2*len(es)*(r+1) {
			if ctx.Err() != nil {
				t.Fatalf("round %d: %d of %d completions seen", r, total(), 2*len(es)*(r+1))
			}
			runtime.Gosched()
		}
	}
	stop()
	for i, e := range es {
		if got[e.q] != want {
			t.Errorf("end %d: %d completions, want %d", i, got[e.q], want)
		}
	}
}

// sharedChannel opens the device, allocates a PD and creates a shared
// completion channel, all released at the end of the test after what the
// test creates on them (cleanups run last-in first-out).
func sharedChannel(t *testing.T) (*uverbs.Context, *uverbs.PD, *cq.Channel) {
	t.Helper()
	c := open(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pd.Dealloc(); err != nil {
			t.Errorf("PD Dealloc: %v", err)
		}
	})
	ch, err := cq.NewChannel(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ch.Close(); err != nil {
			t.Errorf("Channel Close: %v", err)
		}
	})
	return c, pd, ch
}

// idleCQs adds n armed CQs to ch that never complete.
func idleCQs(t *testing.T, c *uverbs.Context, ch *cq.Channel, n int) {
	t.Helper()
	for range n {
		q, err := cq.New(c, 4, &cq.Options{Channel: ch})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := q.Close(context.Background()); err != nil {
				t.Errorf("idle CQ Close: %v", err)
			}
		})
	}
}

// TestVMChannelWaitAfterClose: a CQ that Wait returned and the
// application closed with completions still in it leaves the channel for
// good: later Waits neither report it nor fail, and still report the
// other CQs.
func TestVMChannelWaitAfterClose(t *testing.T) {
	c, pd, ch := sharedChannel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := newEnd(t, c, pd, &cq.Options{Channel: ch}, 8, 64)
	b := newEnd(t, c, pd, &cq.Options{Channel: ch}, 8, 64)
	connect(t, c, a.qp, a.qp.QPN())
	connect(t, c, b.qp, b.qp.QPN())
	a.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: a.sge(0)}})
	a.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: a.sge(9)}})
	q, err := ch.Wait(ctx)
	if err != nil || q != a.q {
		t.Fatalf("Wait = %p, %v; want a's CQ %p", q, err, a.q)
	}
	// Close a's QP and CQ without polling: the CQ is on the recheck list.
	if err := a.qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	if q, err := ch.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait after Close = %p, %v; want context.DeadlineExceeded", q, err)
	}
	cancelShort()
	b.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: b.sge(0)}})
	b.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: b.sge(9)}})
	if q, err := ch.Wait(ctx); err != nil || q != b.q {
		t.Fatalf("Wait for b = %p, %v; want b's CQ %p", q, err, b.q)
	}
}

// TestVMSharedChannelCloseWakesWait: Close of one CQ of a shared channel
// wakes a Wait blocked on that CQ with ErrClosed, whether that Wait is
// the one reading the channel for all its CQs or is waiting for its turn,
// and the other CQ's Wait goes on to report its completion. After Close,
// Wait, GetWC and Fd report ErrClosed.
func TestVMSharedChannelCloseWakesWait(t *testing.T) {
	for _, closedFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "closed-waits-first", false: "other-waits-first"}[closedFirst], func(t *testing.T) {
			c, pd, ch := sharedChannel(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := cq.New(c, 4, &cq.Options{Channel: ch})
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					a.Close(context.Background())
				}
			})
			b := newEnd(t, c, pd, &cq.Options{Channel: ch}, 8, 64)
			connect(t, c, b.qp, b.qp.QPN())
			ra, rb := make(chan error, 1), make(chan error, 1)
			// Each Wait has begun waiting before the next starts: the
			// first reads the channel (parked in internal/sys), the
			// second waits for its turn in cq's select.
			start := func(q *cq.CQ, r chan error, first bool) {
				go func() { r <- q.Wait(context.Background()) }()
				var err error
				var ok bool
				if first {
					err, ok = blockedOrDone(t, r, "cq.(*CQ).Wait")
				} else {
					err, ok = selectOrDone(t, r, "cq.(*CQ).Wait")
				}
				if ok {
					t.Fatalf("Wait returned with nothing to wait for: %v", err)
				}
			}
			if closedFirst {
				start(a, ra, true)
				start(b.q, rb, false)
			} else {
				start(b.q, rb, true)
				start(a, ra, false)
			}
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}
			closed = true
			select {
			case err := <-ra:
				if !errors.Is(err, uverbs.ErrClosed) {
					t.Fatalf("Wait across Close = %v, want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Wait on the closed CQ still blocked after Close")
			}
			b.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: b.sge(0)}})
			b.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: b.sge(9)}})
			select {
			case err := <-rb:
				if err != nil {
					t.Fatalf("the other CQ's Wait = %v", err)
				}
			case <-ctx.Done():
				t.Fatal("the other CQ's Wait missed its completion")
			}
			if err := a.Wait(ctx); !errors.Is(err, uverbs.ErrClosed) {
				t.Fatalf("Wait after Close = %v", err)
			}
			if _, err := a.GetWC(make([]uverbs.WC, 1)); !errors.Is(err, uverbs.ErrClosed) {
				t.Fatalf("GetWC after Close = %v", err)
			}
			if fd, err := a.Fd(); fd != -1 || !errors.Is(err, uverbs.ErrClosed) {
				t.Fatalf("Fd after Close = %d, %v", fd, err)
			}
		})
	}
}

// selectOrDone waits until a goroutine waits in a select in frame
// (testkit.WaitingIn; a CQ's Wait waiting for its turn at a shared
// channel) or r delivers, whichever comes first, and says which: a test's
// wake-up acts only once the waits it means to wake have begun. Bounded
// at 10 s.
func selectOrDone(t *testing.T, r <-chan error, frame string) (error, bool) {
	t.Helper()
	return waitFor(t, r, "a goroutine in a select in "+frame, func() bool { return testkit.WaitingIn(frame, "[select") > 0 })
}

// blockedOrDone is selectOrDone for a wait in frame that has reached
// internal/sys (testkit.WaitBlocked).
func blockedOrDone(t *testing.T, r <-chan error, frame string) (error, bool) {
	t.Helper()
	return waitFor(t, r, "a goroutine blocked in internal/sys in "+frame, func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return testkit.WaitBlocked(ctx, frame) == nil
	})
}

func waitFor(t *testing.T, r <-chan error, what string, ready func() bool) (error, bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-r:
			return err, true
		default:
		}
		if ready() {
			return nil, false
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestVMMixedWaits: Channel.Wait and a CQ's own Wait on one channel at
// once. Channel.Wait reading the event of a CQ whose own Wait is blocked
// (holding that CQ's wait lock, waiting for the channel) used to wait for
// that lock while holding the channel, and both stayed blocked until a
// context ended; now both return for the event. And an event that the
// CQ's Wait reads for another CQ is left for Channel.Wait, which reports
// that CQ at once.
func TestVMMixedWaits(t *testing.T) {
	ch, a, b := selfPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drain := func(e *end) {
		t.Helper()
		wcs := make([]uverbs.WC, 8)
		for got := 0; got < 2; {
			n, err := e.q.GetWC(wcs)
			if err != nil {
				t.Fatal(err)
			}
			got += n
			if n == 0 {
				if err := e.q.Wait(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// 1. Channel.Wait reads the channel; a's own Wait waits its turn.
	type res struct {
		q   *cq.CQ
		err error
	}
	rc := make(chan res, 1)
	go func() { q, err := ch.Wait(ctx); rc <- res{q, err} }()
	// Channel.Wait holds the reader before a's Wait starts: parked
	// reading the channel (a sleep could be outrun by a stalled guest).
	testkit.MustBlock(t, "cq.(*Channel).Wait")
	select {
	case r := <-rc:
		t.Fatalf("Channel.Wait returned with nothing to wait for: %p, %v", r.q, r.err)
	default:
	}
	ra := make(chan error, 1)
	go func() { ra <- a.q.Wait(ctx) }()
	// a's Wait waits for its turn at the channel behind Channel.Wait.
	if err, ok := selectOrDone(t, ra, "cq.(*CQ).Wait"); ok {
		t.Fatalf("a's Wait returned with nothing to wait for: %v", err)
	}
	a.sendToSelf(t)
	select {
	case r := <-rc:
		if r.err != nil || r.q != a.q {
			t.Fatalf("Channel.Wait = %p, %v; want a's CQ %p", r.q, r.err, a.q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Channel.Wait blocked on a's event")
	}
	select {
	case err := <-ra:
		if err != nil {
			t.Fatalf("a's Wait = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's Wait blocked after Channel.Wait read its event")
	}
	drain(a)

	// 2. a's own Wait reads the channel and takes b's event: Channel.Wait
	// reports b.
	//
	// Part 1 may have left one event of a's in the channel: the first of
	// a's two completions woke the waiters and the CQ was armed again, so
	// if the second came after that arm it raised an event of its own
	// (drain has polled it since). Wait may return for such an event
	// (its doc comment, and rpma_cq_wait(3)); it cannot return twice, as
	// its arm after that event sees nothing new.
	for spurious := 0; ; spurious++ {
		go func() { ra <- a.q.Wait(ctx) }()
		// Parked reading the channel, so that it is a's Wait, not
		// Channel.Wait below, that reads b's event.
		if err, ok := blockedOrDone(t, ra, "cq.(*CQ).Wait"); ok {
			if n, _ := a.q.GetWC(make([]uverbs.WC, 1)); err == nil && n == 0 && spurious == 0 {
				t.Log("a's Wait returned for the event of part 1's second completion, already polled; waiting again")
				continue
			}
			t.Fatalf("a's Wait returned with nothing to wait for: %v", err)
		}
		break
	}
	b.sendToSelf(t)
	short, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	q, err := ch.Wait(short)
	cancelShort()
	if err != nil || q != b.q {
		t.Fatalf("Channel.Wait = %p, %v; want b's CQ %p", q, err, b.q)
	}
	drain(b)
	a.sendToSelf(t)
	select {
	case err := <-ra:
		if err != nil {
			t.Fatalf("a's Wait = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a's Wait missed its completion")
	}
	drain(a)
}

// TestVMAllNilContext: All on an empty CQ with a nil context yields one
// ErrInvalid and ends (it used to panic, asking the nil ctx why its Wait
// failed); GetWC with no room is ErrInvalid too.
func TestVMAllNilContext(t *testing.T) {
	c := open(t)
	q, err := cq.New(c, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(context.Background())
	n := 0
	//lint:ignore SA1012 a nil context is the bad input under test
	for _, err := range q.All(nil, nil) {
		n++
		if !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("All(nil) yielded %v", err)
		}
	}
	if n != 1 {
		t.Errorf("All(nil) yielded %d times, want 1", n)
	}
	// rpma_cq_get_wc refuses num_entries below 1 (RPMA_E_INVAL).
	for _, wcs := range [][]uverbs.WC{nil, make([]uverbs.WC, 0, 4)} {
		if k, err := q.GetWC(wcs); k != 0 || !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("GetWC(%d of cap %d) = %d, %v; want 0 and ErrInvalid", len(wcs), cap(wcs), k, err)
		}
	}
}

// TestVMRecheckRacesEvent: a CQ's event that a CQ.Wait (on another CQ of
// the channel) reads while a Channel.Wait's recheck holds the CQ, after
// the recheck found it armed and empty, is not lost: the CQ is re-armed
// and Channel.Wait reports it. The old code only signalled the CQ's own
// waiter; the recheck then took the CQ off its list as armed, although
// the event had disarmed it, and Channel.Wait never reported it again.
func TestVMRecheckRacesEvent(t *testing.T) {
	ch, a, b := selfPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drain := func(e *end) {
		t.Helper()
		wcs := make([]uverbs.WC, 8)
		for got := 0; got < 2; {
			n, err := e.q.GetWC(wcs)
			if err != nil {
				t.Fatal(err)
			}
			if got += n; ctx.Err() != nil {
				t.Fatalf("%d of 2 completions: %v", got, ctx.Err())
			}
		}
	}
	// b on Channel.Wait's recheck list, armed and empty.
	b.sendToSelf(t)
	if q, err := ch.Wait(ctx); err != nil || q != b.q {
		t.Fatalf("Channel.Wait = %p, %v; want b's CQ %p", q, err, b.q)
	}
	drain(b)

	// Buffered: a's Wait may read b's event before the hook below waits
	// for it (rxe may complete the send within PostSend).
	busy := make(chan struct{}, 1)
	var once sync.Once
	cq.SetHookForTest(func(point string, q *cq.CQ) {
		switch {
		case point == "recheck:empty" && q == b.q:
			once.Do(func() {
				// b's next completion comes now, and a's Wait reads
				// its event while this recheck holds b.
				b.sendToSelf(t)
				select {
				case <-busy:
				case <-ctx.Done():
					t.Error("a's Wait did not read b's event")
				}
			})
		case point == "dispatch:busy" && q == b.q:
			select {
			case busy <- struct{}{}:
			default:
			}
		}
	})
	actx, stopA := context.WithCancel(ctx)
	aDone := make(chan error, 1)
	go func() { aDone <- a.q.Wait(actx) }()
	defer func() {
		stopA()
		if err := <-aDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("a's Wait: %v", err)
		}
		cq.SetHookForTest(nil)
	}()

	short, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	q, err := ch.Wait(short)
	cancelShort()
	if err != nil || q != b.q {
		t.Fatalf("Channel.Wait after the racing event = %p, %v; want b's CQ %p", q, err, b.q)
	}
	drain(b)
}

// TestVMChannelWaitCQClosedAfterLookup: a CQ closed between Channel.Wait's
// read of its event and the re-arm is skipped like one closed before the
// read: Wait goes on to the next event instead of failing with ErrClosed,
// which a server loop would take for the channel's own close.
func TestVMChannelWaitCQClosedAfterLookup(t *testing.T) {
	ch, a, b := selfPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	complete := func(e *end) {
		t.Helper()
		e.sendToSelf(t)
		for {
			if n, err := e.q.Verbs().Ready(); err != nil || n == 2 {
				if err != nil {
					t.Fatal(err)
				}
				return // its event is queued: the kernel queues it as it writes the completion
			}
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
		}
	}
	complete(b) // b's event first, then a's
	complete(a)
	closed := false
	cq.SetHookForTest(func(point string, q *cq.CQ) {
		if point == "event:found" && q == b.q && !closed {
			closed = true
			if err := b.qp.Destroy(ctx); err != nil {
				t.Errorf("QP Destroy: %v", err)
			}
			if err := b.q.Close(ctx); err != nil {
				t.Errorf("CQ Close: %v", err)
			}
		}
	})
	defer cq.SetHookForTest(nil)
	q, err := ch.Wait(ctx)
	if err != nil || q != a.q {
		t.Fatalf("Channel.Wait = %p, %v; want a's CQ %p (b's %p closed after its event was read)", q, err, a.q, b.q)
	}
	if !closed {
		t.Fatal("b's event never reached the hook")
	}
}

// TestVMCloseTwiceAtOnce: a second Close while the first waits for the
// application to acknowledge an asynchronous event of the CQ waits for it
// and reports the CQ closed; the CQ's own channel is closed, not left
// open by the second Close's early attempt (EBUSY: the CQ still on it).
func TestVMCloseTwiceAtOnce(t *testing.T) {
	c := open(t)
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	q, err := cq.New(c, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	chfd, err := q.Fd()
	if err != nil {
		t.Fatal(err)
	}
	n := q.Verbs().CQE() + 4
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: q.Verbs(), RecvCQ: q.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: n, MaxRecvWR: n, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, c, qp, qp.QPN())
	// More completions than the CQ holds: IBV_EVENT_CQ_ERR.
	if err := qp.PostRecv(make([]uverbs.RecvWR, n)); err != nil {
		t.Fatal(err)
	}
	swrs := make([]uverbs.SendWR, n)
	for i := range swrs {
		swrs[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
	}
	if err := qp.PostSend(swrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var held async.Event
	for {
		ev, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("no CQ_ERR: %v", err)
		}
		if ev.Type == async.CQErr && ev.Element == uverbs.Affiliated(q.Verbs()) {
			held = ev
			break
		}
		r.Ack(ev)
	}
	// Everything after is acknowledged as it comes; held stays.
	acker := make(chan struct{})
	go func() {
		defer close(acker)
		for {
			e, err := r.Get(ctx)
			if err != nil {
				return
			}
			r.Ack(e)
		}
	}()
	if err := qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- q.Close(ctx) }()
	// The first Close has destroyed the CQ in the kernel and waits for
	// the acknowledgement.
	for {
		if _, err := q.Verbs().Ready(); errors.Is(err, uverbs.ErrClosed) {
			break
		}
		select {
		case err := <-first:
			t.Fatalf("Close returned with an event unacknowledged: %v", err)
		case <-ctx.Done():
			t.Fatal("the first Close never destroyed the CQ")
		default:
			runtime.Gosched()
		}
	}
	second := make(chan error, 1)
	go func() { second <- q.Close(ctx) }()
	select {
	case err := <-second:
		t.Fatalf("a second Close returned while the first waits: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	r.Ack(held)
	if err := <-first; err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := <-second; !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	for _, fd := range sys.OpenFDs() {
		if strings.HasPrefix(fd, fmt.Sprintf("fd %d (", chfd)) {
			t.Fatalf("the CQ's own channel (fd %d) left open", chfd)
		}
	}
	cancel()
	<-acker
}

// TestVMCloseEndedContext: Close with a context that has already ended
// (a shutdown's cancelled context) still destroys the CQ and closes its
// own channel: the context bounds only waits, and there is none here.
func TestVMCloseEndedContext(t *testing.T) {
	c := open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		q, err := cq.New(c, 4, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Close(ctx); err != nil {
			t.Fatalf("round %d: Close with an ended context: %v", i, err)
		}
		if _, err := q.Verbs().Ready(); !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("round %d: the CQ lives on after Close: %v", i, err)
		}
		if _, err := q.Fd(); !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("round %d: Fd after Close = %v", i, err)
		}
	}
}
