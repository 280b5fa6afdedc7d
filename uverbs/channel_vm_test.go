package uverbs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// chanQP is a looped-back RC QP whose send and receive CQs report to
// channel ch (the same or two CQs).
func chanQP(t *testing.T, c *uverbs.Context, pd *uverbs.PD, scq, rcq *uverbs.CQ) *uverbs.QP {
	t.Helper()
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: scq, RecvCQ: rcq,
		Cap: uverbs.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	loopbackRTS(t, c, qp)
	return qp
}

// TestVMCompChannel: an armed CQ reports one event per arm on its channel,
// GetCQEvent names the CQ, a completion that came before the arm raises no
// event (the re-poll rule), a user's own epoll on Fd sees the event, and
// destroying the CQ waits for the event's ack.
func TestVMCompChannel(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sys.IsCloexec(ch.Fd()); !ok || err != nil {
		t.Fatal("channel fd not O_CLOEXEC")
	}
	cq, err := c.CreateCQ(64, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	if cq.Channel() != ch {
		t.Fatal("CQ.Channel")
	}
	qp := chanQP(t, c, pd, cq, cq)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	roundTrip := func() {
		t.Helper()
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
			t.Fatal(err)
		}
	}

	// Not armed: completions arrive, no event.
	roundTrip()
	pollN(t, cq, 2)
	if _, err := ch.TryGetCQEvent(); !errors.Is(err, uverbs.ErrNoEvent) || !errors.Is(err, sys.EAGAIN) {
		t.Fatalf("event without an arm: %v", err)
	}
	// Armed: one event.
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	roundTrip()
	got, err := ch.GetCQEvent(ctx)
	if err != nil || got != cq {
		t.Fatalf("GetCQEvent = %v, %v", got, err)
	}
	pollN(t, cq, 2)
	if err := cq.AckEvents(1); err != nil {
		t.Fatal(err)
	}
	if err := cq.AckEvents(1); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("over-ack = %v", err)
	}
	// The event fired once per arm: the second completion of that round
	// and later ones raise nothing until the next arm.
	roundTrip()
	pollN(t, cq, 2)
	if _, err := ch.TryGetCQEvent(); !errors.Is(err, uverbs.ErrNoEvent) {
		t.Fatalf("second event without re-arming: %v", err)
	}
	// A user's own epoll loop on Fd sees the next event.
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if ok, _ := testkit.EpollReadable(ch.Fd(), 20*time.Millisecond); ok {
		t.Fatal("fd readable before any completion")
	}
	roundTrip()
	if ok, err := testkit.EpollReadable(ch.Fd(), 5*time.Second); !ok || err != nil {
		t.Fatalf("epoll on Fd: %v %v", ok, err)
	}
	if got, err := ch.TryGetCQEvent(); err != nil || got != cq {
		t.Fatalf("TryGetCQEvent after epoll = %v, %v", got, err)
	}
	pollN(t, cq, 2)
	// Leave that event unacknowledged: Destroy waits for it.
	if err := qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err = cq.Destroy(short)
	cancel2()
	var ue *uverbs.UnackedError
	if !errors.As(err, &ue) || ue.Comp != 1 || ue.Async != 0 {
		t.Fatalf("Destroy with an unacked completion event = %v", err)
	}
	if err := cq.AckEvents(1); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatalf("channel Close after its CQ: %v", err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMSharedChannel: one channel serves a send CQ and a receive CQ; each
// event names the CQ that completed, and the channel refuses to close
// while CQs use it.
func TestVMSharedChannel(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	scq, err := c.CreateCQ(16, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := c.CreateCQ(16, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp := chanQP(t, c, pd, scq, rcq)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for round := 0; round < 20; round++ {
		// Arm only one of the two, alternately: the event names it.
		want := scq
		if round%2 == 1 {
			want = rcq
		}
		if err := want.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
			t.Fatal(err)
		}
		got, err := ch.GetCQEvent(ctx)
		if err != nil || got != want {
			t.Fatalf("round %d: event for %v, want %v (%v)", round, got, want, err)
		}
		got.AckEvents(1)
		pollN(t, scq, 1)
		pollN(t, rcq, 1)
		if _, err := ch.TryGetCQEvent(); !errors.Is(err, uverbs.ErrNoEvent) {
			t.Fatalf("round %d: extra event %v", round, err)
		}
	}
	if err := ch.Close(); !errors.Is(err, sys.EBUSY) {
		t.Fatalf("Close with CQs on the channel = %v", err)
	}
	qp.Destroy(ctx)
	scq.Destroy(ctx)
	rcq.Destroy(ctx)
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	pd.Dealloc()
}

// TestVMChannelCloseWakes: a goroutine blocked in GetCQEvent wakes with
// ErrClosed when the channel closes, and when the Context closes; no fd is
// left open.
func TestVMChannelCloseWakes(t *testing.T) {
	testkit.RequireVM(t)
	for _, viaContext := range []bool{false, true} {
		c, err := uverbs.OpenByName(testkit.RxeDev)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := c.CreateCompChannel()
		if err != nil {
			t.Fatal(err)
		}
		cq, err := c.CreateCQ(4, &uverbs.CQOptions{Channel: ch})
		if err != nil {
			t.Fatal(err)
		}
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { _, err := ch.GetCQEvent(context.Background()); done <- err }()
		testkit.MustBlock(t, "uverbs.(*CompChannel).GetCQEvent") // the close wakes a wait that has begun
		select {
		case err := <-done:
			t.Fatalf("GetCQEvent returned without an event: %v", err)
		default:
		}
		if viaContext {
			c.Close()
		} else {
			if err := cq.Destroy(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := ch.Close(); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-done:
			if !errors.Is(err, uverbs.ErrClosed) {
				t.Fatalf("woken with %v, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("GetCQEvent still blocked after Close")
		}
		c.Close()
		if f := sys.OpenFDs(); len(f) != 0 {
			t.Fatalf("fds left: %v", f)
		}
	}
}

// TestVMChannelNoAllocs: arm, one completion, get the event, ack and poll
// allocate nothing per round.
func TestVMChannelNoAllocs(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(64, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp := chanQP(t, c, pd, cq, cq)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rwr := []uverbs.RecvWR{{ID: 1}}
	swr := []uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}
	wcs := make([]uverbs.WC, 4)
	testkit.NoAllocs(t, 300, func() {
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		qp.PostRecv(rwr)
		qp.PostSend(swr)
		if _, err := ch.GetCQEvent(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cq.AckEvents(1); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			n, _ := cq.Poll(wcs)
			got += n
		}
	})
	qp.Destroy(ctx)
	cq.Destroy(ctx)
	ch.Close()
	pd.Dealloc()
}
