package uverbs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMSRQSharedByQPs: four looped-back RC QPs take their receives from
// one SRQ; every message lands in some SRQ buffer, its completion names the
// QP it arrived on, and the bytes are the sender's.
func TestVMSRQSharedByQPs(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 64, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(256, nil)
	if err != nil {
		t.Fatal(err)
	}
	const nqp, per, size = 4, 5, 64
	buf := make([]byte, 2*nqp*per*size)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	recvBase := nqp * per * size
	rwrs := make([]uverbs.RecvWR, nqp*per)
	for i := range rwrs {
		rwrs[i] = uverbs.RecvWR{ID: uint64(i), SGL: []uverbs.SGE{sge(mr, recvBase+i*size, size)}}
	}
	if err := srq.PostRecv(rwrs); err != nil {
		t.Fatal(err)
	}
	var qps []*uverbs.QP
	for i := 0; i < nqp; i++ {
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
			Cap: uverbs.QPCap{MaxSendWR: 8, MaxSendSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); !errors.Is(err, uverbs.ErrInvalid) {
			t.Fatalf("PostRecv on a QP with an SRQ = %v", err)
		}
		loopbackRTS(t, c, qp)
		qps = append(qps, qp)
	}
	le := binary.LittleEndian
	for i, qp := range qps {
		swrs := make([]uverbs.SendWR, per)
		for j := range swrs {
			off := (i*per + j) * size
			le.PutUint32(buf[off:], qp.QPN())
			le.PutUint32(buf[off+4:], uint32(j))
			swrs[j] = uverbs.SendWR{ID: uint64(1000 + i*per + j), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{sge(mr, off, size)}}
		}
		if err := qp.PostSend(swrs); err != nil {
			t.Fatal(err)
		}
	}
	wcs := pollN(t, cq, 2*nqp*per)
	got := map[[2]uint32]bool{}
	for _, wc := range wcs {
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("completion %+v (%v)", wc, wc.Status)
		}
		if wc.Opcode != uverbs.WCRecv {
			continue
		}
		b := buf[recvBase+int(wc.ID)*size:]
		from, seq := le.Uint32(b), le.Uint32(b[4:])
		if from != wc.QPNum || wc.ByteLen != size || got[[2]uint32{from, seq}] {
			t.Fatalf("receive %+v holds message %d from QP %d", wc, seq, from)
		}
		got[[2]uint32{from, seq}] = true
	}
	if len(got) != nqp*per {
		t.Fatalf("%d distinct messages received, want %d", len(got), nqp*per)
	}
	for _, qp := range qps {
		if err := qp.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []func() error{func() error { return srq.Destroy(bg(t)) }, mr.Dereg, func() error { return cq.Destroy(bg(t)) }, pd.Dealloc} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	waitResources(t, base)
}

// TestVMSRQLimitEvent: an SRQ armed with a limit raises
// IBV_EVENT_SRQ_LIMIT_REACHED, mapped to our *SRQ, once its posted
// receives drop below the limit, and destroying it waits for the Ack.
func TestVMSRQLimitEvent(t *testing.T) {
	c := openRxe(t)
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 32, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	loopbackRTS(t, c, qp)
	if err := srq.PostRecv(make([]uverbs.RecvWR, 12)); err != nil {
		t.Fatal(err)
	}
	if err := srq.Modify(uverbs.SRQAttr{Limit: 8}, uverbs.SRQAttrLimit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Three receives consumed: 9 left, still above the limit, no event.
	send := func(n int) {
		wrs := make([]uverbs.SendWR, n)
		for i := range wrs {
			wrs[i] = uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
		}
		if err := qp.PostSend(wrs); err != nil {
			t.Fatal(err)
		}
		for _, wc := range pollN(t, cq, 2*n) {
			if wc.Status != uverbs.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
	}
	send(3)
	if ev, err := r.TryGet(); err == nil {
		t.Fatalf("event %v with 9 receives left above a limit of 8", ev)
	}
	send(2) // 7 left
	ev, err := r.Get(ctx)
	if err != nil {
		t.Fatalf("no SRQ_LIMIT_REACHED: %v", err)
	}
	if ev.Type != async.SRQLimitReached || ev.Element != uverbs.Affiliated(srq) {
		t.Fatalf("event %v element %v, want SRQ_LIMIT_REACHED of our SRQ", ev, ev.Element)
	}
	if a, err := srq.Query(); err != nil || a.Limit != 0 {
		t.Fatalf("limit after the event: %+v %v (the event disarms it)", a, err)
	}
	if err := qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	returned := make(chan time.Time, 1)
	go func() {
		if err := srq.Destroy(ctx); err != nil {
			t.Errorf("SRQ Destroy: %v", err)
		}
		returned <- time.Now()
	}()
	select {
	case <-returned:
		t.Fatal("SRQ Destroy returned before the Ack")
	case <-time.After(300 * time.Millisecond):
	}
	acked := time.Now()
	if err := r.Ack(ev); err != nil {
		t.Fatal(err)
	}
	if at := <-returned; at.Before(acked) {
		t.Fatal("SRQ Destroy returned before the Ack")
	}
	cq.Destroy(ctx)
	pd.Dealloc()
}
