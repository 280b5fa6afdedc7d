package uverbs_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// chanBed is a PD and a completion channel with n CQs on it, and what
// the rxe device held before (for the leak check of close).
type chanBed struct {
	base map[string]int
	pd   *uverbs.PD
	ch   *uverbs.CompChannel
	cqs  []*uverbs.CQ
}

func newChanBed(t *testing.T, c *uverbs.Context, n, cqe int) *chanBed {
	t.Helper()
	b := &chanBed{base: testkit.Resources(t, testkit.RxeDev)}
	var err error
	if b.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if b.ch, err = c.CreateCompChannel(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		cq, err := c.CreateCQ(cqe, &uverbs.CQOptions{Channel: b.ch})
		if err != nil {
			t.Fatal(err)
		}
		b.cqs = append(b.cqs, cq)
	}
	return b
}

// close destroys qps, then the bed, and checks that the device holds
// what it held before.
func (b *chanBed) close(t *testing.T, qps ...*uverbs.QP) {
	t.Helper()
	for _, qp := range qps {
		if err := qp.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cq := range b.cqs {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, b.base)
}

// TestVMChannelWaitReadsOnce: a wait on a channel whose armed CQ has had
// no completion since the arm parks without the read that would fail with
// EAGAIN (uverbs/arm.go), so every GetCQEvent makes exactly one read(2),
// as librxe's blocking read does:
//
//   - late rounds: the send that raises the event is posted at the moment
//     the channel decides to park (the test hook), after the runtime
//     poller forgot past readiness: the event must wake the wait (a
//     context bounds it), and the decision must be made at all (else
//     nothing is posted and the wait times out);
//   - early rounds: the event is queued before the wait begins, so the
//     channel must read, not park.
//
// Each round arms the receive CQ before it polls the previous round's
// completions, as a ping-pong does: completions older than the arm must
// not count as news. The send CQ shares the channel unarmed.
func TestVMChannelWaitReadsOnce(t *testing.T) {
	c := openRxe(t)
	b := newChanBed(t, c, 2, 64)
	ch, scq, rcq := b.ch, b.cqs[0], b.cqs[1]
	qp := chanQP(t, c, b.pd, scq, rcq)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ra, _ := threadIO(t)
	rb, _ := threadIO(t)
	costR := rb - ra

	send := func() {
		if err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
			t.Error(err)
		}
	}
	var onPark func()
	parks := 0
	uverbs.SetHookForTest(func(point string) {
		if point == "comp_channel:park" {
			parks++
			if f := onPark; f != nil {
				onPark = nil
				f()
			}
		}
	})
	defer uverbs.SetHookForTest(nil)

	const rounds = 60
	wcs := make([]uverbs.WC, 4)
	left := 0 // completions of the previous round not yet polled
	var lateReads, earlyReads, lateParks, earlyParks int
	for i := 0; i < rounds; i++ {
		late := i%2 == 0
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := rcq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		for left > 0 {
			n, err := rcq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			left -= n
		}
		pollN(t, scq, min(i, 1))
		if late {
			onPark = send
		} else {
			send()
			// Queued: the channel polls readable (an epoll of our own,
			// which leaves the runtime poller's edge alone).
			if ok, err := testkit.EpollReadable(ch.Fd(), 5*time.Second); !ok || err != nil {
				t.Fatalf("round %d: no event after the send: %v", i, err)
			}
		}
		p0 := parks
		r0, _ := threadIO(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		got, err := ch.GetCQEvent(ctx)
		cancel()
		r1, _ := threadIO(t)
		if err != nil || got != rcq {
			t.Fatalf("round %d (late %v): GetCQEvent = %v, %v (parks %d)", i, late, got, err, parks-p0)
		}
		if err := rcq.AckEvents(1); err != nil {
			t.Fatal(err)
		}
		left = 1
		if late {
			lateReads += r1 - r0 - costR
			lateParks += parks - p0
		} else {
			earlyReads += r1 - r0 - costR
			earlyParks += parks - p0
		}
	}
	pollN(t, rcq, left)
	pollN(t, scq, 1)
	t.Logf("%d waits with the event coming late: %d reads, %d parks; %d with it queued: %d reads, %d parks",
		rounds/2, lateReads, lateParks, rounds/2, earlyReads, earlyParks)
	if lateReads != rounds/2 || earlyReads != rounds/2 {
		t.Errorf("reads per wait: late %d/%d, early %d/%d; want one each", lateReads, rounds/2, earlyReads, rounds/2)
	}
	if lateParks != rounds/2 || earlyParks != 0 {
		t.Errorf("parks without a read: late %d/%d, early %d/0", lateParks, rounds/2, earlyParks)
	}

	b.close(t, qp)
}

// TestVMChannelHintStress: four looped-back QPs, each with its own CQ on
// one channel, send from four goroutines at random moments while one
// waiter reads events, re-arms and drains, as an event-driven server
// does. Arms, polls, the kernel's completions and the channel's decision
// to park without reading race each other; an event slept through would
// hang the waiter (bounded by its context) and fail the test. Every
// completion is counted once.
func TestVMChannelHintStress(t *testing.T) {
	c := openRxe(t)
	const nqp, msgs, window = 4, 400, 16
	// Messages in flight per QP: one at a time (an event each) up to
	// bursts that the waiter drains in batches.
	windows := [nqp]int64{1, 2, 4, window}
	b := newChanBed(t, c, nqp, 4*window)
	ch, cqs := b.ch, b.cqs
	qps := make([]*uverbs.QP, nqp)
	index := map[*uverbs.CQ]int{}
	for i := range cqs {
		qps[i] = chanQP(t, c, b.pd, cqs[i], cqs[i])
		index[cqs[i]] = i
	}
	var parks atomic.Int64
	uverbs.SetHookForTest(func(point string) {
		if point == "comp_channel:park" {
			parks.Add(1)
		}
	})
	defer uverbs.SetHookForTest(nil)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var received [nqp]atomic.Int64 // receive completions per QP
	var wg sync.WaitGroup
	for i := range qps {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for k := 0; k < msgs; k++ {
				for int64(k)-received[i].Load() >= windows[i] {
					if ctx.Err() != nil {
						return
					}
					runtime.Gosched()
				}
				if err := qps[i].PostRecv([]uverbs.RecvWR{{ID: uint64(k)}}); err != nil {
					t.Error(err)
					return
				}
				if err := qps[i].PostSend([]uverbs.SendWR{{ID: uint64(k), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
					t.Error(err)
					return
				}
				for j := rng.IntN(4); j > 0; j-- {
					runtime.Gosched()
				}
			}
		}(i)
	}

	for _, cq := range cqs {
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
	}
	var sends [nqp]int
	events, total := 0, 0
	wcs := make([]uverbs.WC, 16)
	for total < 2*nqp*msgs {
		cq, err := ch.GetCQEvent(ctx)
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("after %d events and %d of %d completions: %v", events, total, 2*nqp*msgs, err)
		}
		events++
		if err := cq.AckEvents(1); err != nil {
			t.Fatal(err)
		}
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		i := index[cq]
		for {
			n, err := cq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, wc := range wcs[:n] {
				if wc.Status != uverbs.WCSuccess {
					t.Fatalf("QP %d: completion %+v", i, wc)
				}
				if wc.Opcode == uverbs.WCRecv {
					received[i].Add(1)
				} else {
					sends[i]++
				}
			}
			total += n
		}
	}
	wg.Wait()
	for i := range qps {
		if got := received[i].Load(); got != msgs || sends[i] != msgs {
			t.Errorf("QP %d: %d receives and %d sends completed, want %d each", i, got, sends[i], msgs)
		}
	}
	// Events raised by completions an earlier drain already took.
	left := 0
	for {
		cq, err := ch.TryGetCQEvent()
		if err != nil {
			break
		}
		cq.AckEvents(1)
		left++
	}
	t.Logf("%d completions, %d events (+%d left over), %d waits parked without reading", total, events, left, parks.Load())
	if parks.Load() == 0 {
		t.Error("no wait parked without reading: the hint never applied")
	}
	b.close(t, qps...)
}
