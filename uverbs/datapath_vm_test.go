package uverbs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// pollN polls cq until n completions arrived (bounded by 10 s).
func pollN(t *testing.T, cq *uverbs.CQ, n int) []uverbs.WC {
	t.Helper()
	out := make([]uverbs.WC, 0, n)
	buf := make([]uverbs.WC, 16)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("got %d of %d completions: %+v", len(out), n, out)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

// loopQP is an RC QP connected to itself on rxe0 with its own CQ.
func loopQP(t *testing.T, c *uverbs.Context, pd *uverbs.PD, cqe int, capSend, capRecv int) (*uverbs.QP, *uverbs.CQ) {
	t.Helper()
	cq, err := c.CreateCQ(cqe, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: capSend, MaxRecvWR: capRecv, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}})
	if err != nil {
		t.Fatal(err)
	}
	loopbackRTS(t, c, qp)
	return qp, cq
}

// TestVMSendRecvZeroLength moves zero-length and inline sends (with and
// without immediate data) through a looped-back RC QP: every send and
// receive completes once, in order, with the right opcode, length, QPN and
// immediate data, and the whole list goes out on one doorbell.
func TestVMSendRecvZeroLength(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq := loopQP(t, c, pd, 64, 16, 16)
	const n = 8
	rwrs := make([]uverbs.RecvWR, n)
	for i := range rwrs {
		rwrs[i] = uverbs.RecvWR{ID: uint64(1000 + i)}
	}
	if err := qp.PostRecv(rwrs); err != nil {
		t.Fatal(err)
	}
	swrs := make([]uverbs.SendWR, n)
	for i := range swrs {
		swrs[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
		if i%2 == 1 {
			swrs[i].Opcode = uverbs.WRSendWithImm
			swrs[i].ImmData = 0xc0de0000 + uint32(i)
		}
	}
	if err := qp.PostSend(swrs); err != nil {
		t.Fatal(err)
	}
	wcs := pollN(t, cq, 2*n)
	var sends, recvs int
	for _, wc := range wcs {
		if wc.Status != uverbs.WCSuccess || wc.QPNum != qp.QPN() {
			t.Fatalf("completion %+v (%v)", wc, wc.Status)
		}
		switch wc.Opcode {
		case uverbs.WCSend:
			if wc.ID != uint64(sends) {
				t.Errorf("send completion %d has id %d", sends, wc.ID)
			}
			sends++
		case uverbs.WCRecv:
			if wc.ID != uint64(1000+recvs) || wc.ByteLen != 0 {
				t.Errorf("recv completion %d: %+v", recvs, wc)
			}
			imm := recvs%2 == 1
			if (wc.Flags&uverbs.WCWithImm != 0) != imm || imm && wc.ImmData != 0xc0de0000+uint32(recvs) {
				t.Errorf("recv %d: flags %v imm %#x", recvs, wc.Flags, wc.ImmData)
			}
			recvs++
		default:
			t.Errorf("unexpected opcode %v", wc.Opcode)
		}
	}
	if sends != n || recvs != n {
		t.Fatalf("%d sends, %d recvs", sends, recvs)
	}
	if k, _ := cq.Poll(make([]uverbs.WC, 4)); k != 0 {
		t.Fatalf("%d extra completions", k)
	}
	if err := qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMPostErrors: full queues and bad requests stop the list at the
// right index with the ones before it posted; posts before RTS and after
// Destroy are refused.
func TestVMPostErrors(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); !errors.Is(err, uverbs.ErrNotReady) {
		t.Fatalf("PostRecv in RESET = %v", err)
	}
	if err := qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend}}); !errors.Is(err, uverbs.ErrNotReady) {
		t.Fatalf("PostSend in RESET = %v", err)
	}
	loopbackRTS(t, c, qp)
	// The ring holds at least the granted capacity (6.1 reports what was
	// asked for, and the power-of-two ring may hold more; librxe, too,
	// fills the ring): the list stops where the ring is full, and a
	// further post stops at its first request.
	capRecv := qp.Cap().MaxRecvWR
	rwrs := make([]uverbs.RecvWR, 64)
	err = qp.PostRecv(rwrs)
	var pe *uverbs.PostError
	if !errors.As(err, &pe) || !errors.Is(err, uverbs.ErrQueueFull) || pe.Index < capRecv || pe.Index >= 64 {
		t.Fatalf("PostRecv of %d into a queue granted %d = %v", len(rwrs), capRecv, err)
	}
	posted := pe.Index
	if err := qp.PostRecv(rwrs[:1]); !errors.As(err, &pe) || !errors.Is(err, uverbs.ErrQueueFull) || pe.Index != 0 {
		t.Fatalf("PostRecv into a full queue = %v", err)
	}
	t.Logf("granted %d receives, ring took %d", capRecv, posted)
	// A bad request in the middle: the first two go out and complete.
	swrs := []uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}, {ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled},
		{ID: 3, Opcode: uverbs.WRSend, SGL: make([]uverbs.SGE, 5)}, {ID: 4, Opcode: uverbs.WRSend}}
	err = qp.PostSend(swrs)
	if !errors.As(err, &pe) || !errors.Is(err, uverbs.ErrInvalid) || pe.Index != 2 {
		t.Fatalf("PostSend with a bad third request = %v", err)
	}
	wcs := pollN(t, cq, 4) // two sends, two receives
	ids := map[uint64]uverbs.WCOpcode{}
	for _, wc := range wcs {
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("completion %+v", wc)
		}
		if wc.Opcode == uverbs.WCSend {
			ids[wc.ID] = wc.Opcode
		}
	}
	if len(ids) != 2 || ids[1] != uverbs.WCSend || ids[2] != uverbs.WCSend {
		t.Fatalf("send completions %v", ids)
	}
	if err := qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(swrs[:1]); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("PostSend after Destroy = %v", err)
	}
	if _, err := (*uverbs.CQ)(nil).Poll(wcs); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("nil Poll = %v", err)
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := cq.Poll(wcs); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Poll after Destroy = %v", err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
}

// markers fails t unless wcs are flushes of exactly the work requests
// ids, in any order: the marker requests a test posts to show that no
// completion it did not expect came before them.
func markers(t *testing.T, wcs []uverbs.WC, ids ...uint64) {
	t.Helper()
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, wc := range wcs {
		if !want[wc.ID] || wc.Status != uverbs.WCWRFlushErr {
			t.Fatalf("completion %+v (%v) where only the flushes of %v were due", wc, wc.Status, ids)
		}
		delete(want, wc.ID)
	}
}

// TestVMFlushOnError: after the QP goes to ERR every outstanding receive
// comes back with WR_FLUSH_ERR, once, and so do sends posted in ERR.
func TestVMFlushOnError(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq := loopQP(t, c, pd, 64, 8, 8)
	rwrs := make([]uverbs.RecvWR, 5)
	for i := range rwrs {
		rwrs[i].ID = uint64(50 + i)
	}
	if err := qp.PostRecv(rwrs); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]uverbs.SendWR{{ID: 7, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}, {ID: 8, Opcode: uverbs.WRSend}}); err != nil {
		t.Fatalf("PostSend in ERR: %v", err)
	}
	wcs := pollN(t, cq, 7)
	seen := map[uint64]bool{}
	for _, wc := range wcs {
		if wc.Status != uverbs.WCWRFlushErr || seen[wc.ID] {
			t.Fatalf("completion %+v (%v)", wc, wc.Status)
		}
		seen[wc.ID] = true
	}
	for _, id := range []uint64{50, 51, 52, 53, 54, 7, 8} {
		if !seen[id] {
			t.Errorf("work request %d did not complete", id)
		}
	}
	// Nothing more: a receive and a send posted now, and flushed, are
	// the next two completions (a second flush of any of the above would
	// come before them, each queue flushing in order).
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 60}}); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]uverbs.SendWR{{ID: 9, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
		t.Fatal(err)
	}
	markers(t, pollN(t, cq, 2), 60, 9)
	qp.Destroy(bg(t))
	cq.Destroy(bg(t))
	pd.Dealloc()
}

// TestVMRecvPostedInErr: a receive posted to a QP already in ERR (and
// flushed) completes, with WR_FLUSH_ERR and once, when the QP is moved
// to ERR again, the remedy PostRecv's doc gives. rxe itself never looks
// at such a receive (rdma-core's librxe posts receives without a system
// call, as we do); the test logs whether this kernel flushed it anyway.
func TestVMRecvPostedInErr(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq := loopQP(t, c, pd, 64, 8, 8)
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	// The flush of receive 1 proves the kernel ran its flush before
	// receives 2 and 3 arrive.
	if wc := pollN(t, cq, 1)[0]; wc.ID != 1 || wc.Status != uverbs.WCWRFlushErr {
		t.Fatalf("flush of the receive posted before ERR: %+v (%v)", wc, wc.Status)
	}
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 2}, {ID: 3}}); err != nil {
		t.Fatalf("PostRecv in ERR: %v", err)
	}
	wcs := make([]uverbs.WC, 8)
	// A measurement, not a wait for something expected: how many the
	// kernel flushed by itself within 200 ms.
	early := 0
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		k, err := cq.Poll(wcs[early:])
		if err != nil {
			t.Fatal(err)
		}
		early += k
	}
	t.Logf("the kernel flushed %d of 2 receives posted in ERR by itself within 200ms", early)
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	got := append(wcs[:early:early], pollN(t, cq, 2-early)...)
	for i, wc := range got {
		if wc.ID != uint64(2+i) || wc.Status != uverbs.WCWRFlushErr {
			t.Fatalf("completion %d: %+v (%v), want receive %d flushed", i, wc, wc.Status, 2+i)
		}
	}
	// Nothing more: a receive posted now and flushed is the next
	// completion.
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 4}}); err != nil {
		t.Fatal(err)
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		t.Fatal(err)
	}
	markers(t, pollN(t, cq, 1), 4)
	qp.Destroy(bg(t))
	cq.Destroy(bg(t))
	pd.Dealloc()
}

// TestVMCQOverflowEvent: more completions than a CQ holds give
// IBV_EVENT_CQ_ERR whose Element is our *CQ, and the CQ's Destroy waits
// for its Ack.
func TestVMCQOverflowEvent(t *testing.T) {
	c := openRxe(t)
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq := loopQP(t, c, pd, 1, 16, 16)
	n := cq.CQE() + 4
	rwrs := make([]uverbs.RecvWR, n)
	swrs := make([]uverbs.SendWR, n)
	for i := range swrs {
		swrs[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
	}
	if err := qp.PostRecv(rwrs); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(swrs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ev async.Event
	for {
		ev, err = r.Get(ctx)
		if err != nil {
			t.Fatalf("no CQ_ERR after %d completions into a CQ of %d: %v", 2*n, cq.CQE(), err)
		}
		if ev.Type == async.CQErr {
			break
		}
		t.Logf("other event %v", ev)
		r.Ack(ev)
	}
	if ev.Element != uverbs.Affiliated(cq) {
		t.Fatalf("CQ_ERR element %v, want our CQ", ev.Element)
	}
	t.Logf("event: %v", ev)
	// The QP must go before its CQ. Every later event (further CQ_ERRs
	// as the CQ keeps overflowing, QP errors) is acknowledged as it comes;
	// only ev stays unacknowledged.
	qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
	go func() {
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
	returned := make(chan time.Time, 1)
	go func() {
		if err := cq.Destroy(ctx); err != nil {
			t.Errorf("CQ Destroy: %v", err)
		}
		returned <- time.Now()
	}()
	select {
	case <-returned:
		t.Fatal("CQ Destroy returned before the CQ_ERR Ack")
	case <-time.After(300 * time.Millisecond):
	}
	acked := time.Now()
	if err := r.Ack(ev); err != nil {
		t.Fatal(err)
	}
	if at := <-returned; at.Before(acked) {
		t.Fatal("CQ Destroy returned before the Ack")
	}
	pd.Dealloc()
}
