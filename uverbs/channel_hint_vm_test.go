package uverbs_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

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
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	scq, err := c.CreateCQ(64, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := c.CreateCQ(64, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp := chanQP(t, c, pd, scq, rcq)

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

	if err := qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	for _, cq := range []*uverbs.CQ{scq, rcq} {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}
