package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// rig is two RC QPs on rxe0 connected to each other (through GID 1), each
// with its own CQ, and two registered buffers.
type rig struct {
	c          *uverbs.Context
	pd         *uverbs.PD
	a, b       *uverbs.QP
	cqa, cqb   *uverbs.CQ
	bufA, bufB []byte
	mrA, mrB   *uverbs.MR
}

const rigAccess = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

func newRig(t *testing.T, size int) *rig {
	t.Helper()
	c := openRxe(t)
	r := &rig{c: c}
	var err error
	if r.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	mk := func() (*uverbs.QP, *uverbs.CQ) {
		cq, err := c.CreateCQ(64, nil)
		if err != nil {
			t.Fatal(err)
		}
		qp, err := r.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}})
		if err != nil {
			t.Fatal(err)
		}
		return qp, cq
	}
	r.a, r.cqa = mk()
	r.b, r.cqb = mk()
	connectRC(t, c, r.a, r.b.QPN())
	connectRC(t, c, r.b, r.a.QPN())
	r.bufA, r.bufB = make([]byte, size), make([]byte, size)
	if r.mrA, err = r.pd.RegMR(r.bufA, rigAccess); err != nil {
		t.Fatal(err)
	}
	if r.mrB, err = r.pd.RegMR(r.bufB, rigAccess); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, q := range []*uverbs.QP{r.a, r.b} {
			q.Destroy(bg(t))
		}
		r.cqa.Destroy(bg(t))
		r.cqb.Destroy(bg(t))
		r.mrA.Dereg()
		r.mrB.Dereg()
		r.pd.Dealloc()
	})
	return r
}

// connectRC drives qp RESET→RTS towards remote QPN dest on rxe0's GID 1.
func connectRC(t *testing.T, c *uverbs.Context, qp *uverbs.QP, dest uint32) {
	t.Helper()
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: rigAccess},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: dest, MaxDestRdAtomic: 4, MinRNRTimer: 12,
			AH: uverbs.AHAttr{DGID: g.GID, SGIDIndex: 1, HopLimit: 1, IsGlobal: true, PortNum: 1}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
				uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("Modify to %v: %v", s.attr.State, err)
		}
	}
}

func sge(mr *uverbs.MR, off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: mr.Addr() + uint64(off), Length: uint32(n), LKey: mr.LKey()}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// one posts wr on qp and returns its (signaled) completion.
func one(t *testing.T, qp *uverbs.QP, cq *uverbs.CQ, wr uverbs.SendWR) uverbs.WC {
	t.Helper()
	wr.Flags |= uverbs.SendSignaled
	if err := qp.PostSend([]uverbs.SendWR{wr}); err != nil {
		t.Fatal(err)
	}
	return pollN(t, cq, 1)[0]
}

// TestVMOpcodes checks every opcode end to end with the memory compared
// byte by byte: sends with several SGEs on both sides and immediate data,
// inline sends, RDMA write (with immediate), RDMA read, and both atomics
// with the original values they return.
func TestVMOpcodes(t *testing.T) {
	r := newRig(t, 1<<16)

	t.Run("send-sgl-imm", func(t *testing.T) {
		fill(r.bufA[:3000], 1)
		clear(r.bufB)
		// Receive into two pieces at B, send from three pieces at A.
		if err := r.b.PostRecv([]uverbs.RecvWR{{ID: 9, SGL: []uverbs.SGE{sge(r.mrB, 100, 1000), sge(r.mrB, 5000, 2000)}}}); err != nil {
			t.Fatal(err)
		}
		wc := one(t, r.a, r.cqa, uverbs.SendWR{ID: 1, Opcode: uverbs.WRSendWithImm, ImmData: 0x12345678,
			SGL: []uverbs.SGE{sge(r.mrA, 0, 500), sge(r.mrA, 500, 1500), sge(r.mrA, 2000, 1000)}})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend || wc.ID != 1 {
			t.Fatalf("send completion %+v (%v)", wc, wc.Status)
		}
		rc := pollN(t, r.cqb, 1)[0]
		if rc.Status != uverbs.WCSuccess || rc.Opcode != uverbs.WCRecv || rc.ByteLen != 3000 || rc.ImmData != 0x12345678 || rc.Flags&uverbs.WCWithImm == 0 || rc.QPNum != r.b.QPN() || rc.ID != 9 {
			t.Fatalf("recv completion %+v", rc)
		}
		got := append(append([]byte{}, r.bufB[100:1100]...), r.bufB[5000:7000]...)
		if !bytes.Equal(got, r.bufA[:3000]) {
			t.Fatal("received bytes differ from the sent ones")
		}
		if r.bufB[99] != 0 || r.bufB[1100] != 0 || r.bufB[7000] != 0 {
			t.Fatal("receive wrote outside its SGEs")
		}
	})

	t.Run("inline", func(t *testing.T) {
		payload := []byte("inline payload, not registered anywhere")
		if err := r.b.PostRecv([]uverbs.RecvWR{{ID: 10, SGL: []uverbs.SGE{sge(r.mrB, 0, 256)}}}); err != nil {
			t.Fatal(err)
		}
		wc := one(t, r.a, r.cqa, uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, Inline: payload})
		rc := pollN(t, r.cqb, 1)[0]
		if wc.Status != uverbs.WCSuccess || rc.Status != uverbs.WCSuccess || rc.ByteLen != uint32(len(payload)) ||
			!bytes.Equal(r.bufB[:len(payload)], payload) {
			t.Fatalf("inline: %+v %+v %q", wc, rc, r.bufB[:len(payload)])
		}
	})

	t.Run("rdma-write-imm", func(t *testing.T) {
		fill(r.bufA[:4096], 3)
		clear(r.bufB)
		wc := one(t, r.a, r.cqa, uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{sge(r.mrA, 0, 4096)},
			RemoteAddr: r.mrB.Addr() + 8192, RKey: r.mrB.RKey()})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMAWrite {
			t.Fatalf("write completion %+v (%v)", wc, wc.Status)
		}
		if !bytes.Equal(r.bufB[8192:8192+4096], r.bufA[:4096]) || r.bufB[8191] != 0 || r.bufB[8192+4096] != 0 {
			t.Fatal("RDMA write: remote memory differs")
		}
		// With immediate data: consumes a receive, whose completion
		// carries the immediate and the RDMA length.
		if err := r.b.PostRecv([]uverbs.RecvWR{{ID: 11}}); err != nil {
			t.Fatal(err)
		}
		wc = one(t, r.a, r.cqa, uverbs.SendWR{ID: 4, Opcode: uverbs.WRRDMAWriteWithImm, ImmData: 0xfeed, SGL: []uverbs.SGE{sge(r.mrA, 0, 64)},
			RemoteAddr: r.mrB.Addr(), RKey: r.mrB.RKey()})
		rc := pollN(t, r.cqb, 1)[0]
		if wc.Status != uverbs.WCSuccess || rc.Opcode != uverbs.WCRecvRDMAWithImm || rc.ImmData != 0xfeed || rc.ByteLen != 64 || rc.ID != 11 {
			t.Fatalf("write with imm: %+v, %+v", wc, rc)
		}
		if !bytes.Equal(r.bufB[:64], r.bufA[:64]) {
			t.Fatal("RDMA write with imm: remote memory differs")
		}
	})

	t.Run("rdma-read", func(t *testing.T) {
		fill(r.bufB[20000:30000], 5)
		clear(r.bufA)
		wc := one(t, r.a, r.cqa, uverbs.SendWR{ID: 5, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{sge(r.mrA, 100, 4000), sge(r.mrA, 9000, 6000)},
			RemoteAddr: r.mrB.Addr() + 20000, RKey: r.mrB.RKey()})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMARead || wc.ByteLen != 10000 {
			t.Fatalf("read completion %+v (%v)", wc, wc.Status)
		}
		got := append(append([]byte{}, r.bufA[100:4100]...), r.bufA[9000:15000]...)
		if !bytes.Equal(got, r.bufB[20000:30000]) {
			t.Fatal("RDMA read: local memory differs")
		}
	})

	t.Run("atomics", func(t *testing.T) {
		le := binary.LittleEndian
		le.PutUint64(r.bufB[64:], 1000)
		// FETCH_AND_ADD returns the original value and adds.
		wc := one(t, r.a, r.cqa, uverbs.SendWR{ID: 6, Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{sge(r.mrA, 0, 8)},
			RemoteAddr: r.mrB.Addr() + 64, RKey: r.mrB.RKey(), CompareAdd: 234})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCFetchAdd || le.Uint64(r.bufA) != 1000 || le.Uint64(r.bufB[64:]) != 1234 {
			t.Fatalf("fetch-add: %+v original %d now %d", wc, le.Uint64(r.bufA), le.Uint64(r.bufB[64:]))
		}
		// CMP_AND_SWP that does not match leaves memory alone.
		wc = one(t, r.a, r.cqa, uverbs.SendWR{ID: 7, Opcode: uverbs.WRAtomicCmpAndSwp, SGL: []uverbs.SGE{sge(r.mrA, 8, 8)},
			RemoteAddr: r.mrB.Addr() + 64, RKey: r.mrB.RKey(), CompareAdd: 1, Swap: 77})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCCompSwap || le.Uint64(r.bufA[8:]) != 1234 || le.Uint64(r.bufB[64:]) != 1234 {
			t.Fatalf("cmp-swap miss: %+v original %d now %d", wc, le.Uint64(r.bufA[8:]), le.Uint64(r.bufB[64:]))
		}
		// One that matches swaps.
		wc = one(t, r.a, r.cqa, uverbs.SendWR{ID: 8, Opcode: uverbs.WRAtomicCmpAndSwp, SGL: []uverbs.SGE{sge(r.mrA, 16, 8)},
			RemoteAddr: r.mrB.Addr() + 64, RKey: r.mrB.RKey(), CompareAdd: 1234, Swap: 77})
		if wc.Status != uverbs.WCSuccess || le.Uint64(r.bufA[16:]) != 1234 || le.Uint64(r.bufB[64:]) != 77 {
			t.Fatalf("cmp-swap hit: %+v original %d now %d", wc, le.Uint64(r.bufA[16:]), le.Uint64(r.bufB[64:]))
		}
		// The original value over two 4-byte SGEs, as librxe allows
		// (8 bytes in all): low half first.
		clear(r.bufA[32:48])
		wc = one(t, r.a, r.cqa, uverbs.SendWR{ID: 9, Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{sge(r.mrA, 32, 4), sge(r.mrA, 40, 4)},
			RemoteAddr: r.mrB.Addr() + 64, RKey: r.mrB.RKey(), CompareAdd: 1 << 32})
		if wc.Status != uverbs.WCSuccess || le.Uint32(r.bufA[32:]) != 77 || le.Uint32(r.bufA[40:]) != 0 || le.Uint64(r.bufB[64:]) != 77+1<<32 {
			t.Fatalf("fetch-add into two SGEs: %+v, halves %d %d, now %d", wc, le.Uint32(r.bufA[32:]), le.Uint32(r.bufA[40:]), le.Uint64(r.bufB[64:]))
		}
	})

	t.Run("unsignaled", func(t *testing.T) {
		// Unsignaled writes with a signaled one every fourth: only those
		// complete, and all of them land.
		fill(r.bufA[:1600], 9)
		clear(r.bufB)
		wrs := make([]uverbs.SendWR, 16)
		for i := range wrs {
			wrs[i] = uverbs.SendWR{ID: uint64(100 + i), Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{sge(r.mrA, i*100, 100)},
				RemoteAddr: r.mrB.Addr() + uint64(i*100), RKey: r.mrB.RKey()}
			if i%4 == 3 {
				wrs[i].Flags = uverbs.SendSignaled
			}
		}
		for i := 0; i < len(wrs); i += 8 { // the send queue holds 16
			if err := r.a.PostSend(wrs[i : i+8]); err != nil {
				t.Fatal(err)
			}
			wcs := pollN(t, r.cqa, 2)
			for j, wc := range wcs {
				if want := uint64(100 + i + 4*j + 3); wc.ID != want || wc.Status != uverbs.WCSuccess {
					t.Fatalf("completion %+v, want id %d", wc, want)
				}
			}
		}
		if k, _ := r.cqa.Poll(make([]uverbs.WC, 4)); k != 0 {
			t.Fatalf("%d completions of unsignaled requests", k)
		}
		if !bytes.Equal(r.bufB[:1600], r.bufA[:1600]) {
			t.Fatal("unsignaled writes did not all land")
		}
	})

	t.Run("wrong-rkey", func(t *testing.T) {
		wc := one(t, r.a, r.cqa, uverbs.SendWR{ID: 12, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{sge(r.mrA, 0, 8)},
			RemoteAddr: r.mrB.Addr(), RKey: r.mrB.RKey() ^ 0x5a5a00})
		if wc.Status != uverbs.WCRemAccessErr || wc.ID != 12 {
			t.Fatalf("write with a wrong rkey: %+v (%v), want %v", wc, wc.Status, uverbs.WCRemAccessErr)
		}
		if wc.Status.String() != "remote access error" {
			t.Fatalf("status text %q", wc.Status)
		}
		// The QP is in error now: further sends flush.
		wc = one(t, r.a, r.cqa, uverbs.SendWR{ID: 13, Opcode: uverbs.WRSend})
		if wc.Status != uverbs.WCWRFlushErr {
			t.Fatalf("send after the error: %v", wc.Status)
		}
		n := r.a.Cap().MaxSendSGE + 1
		if err := r.a.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: make([]uverbs.SGE, n)}}); !errors.Is(err, uverbs.ErrInvalid) {
			t.Fatalf("%d SGEs on a QP granted %d: %v", n, n-1, err)
		}
	})
}

// udQP creates a UD QP on rxe0 in RTS with Q_Key qkey.
func udQP(t *testing.T, pd *uverbs.PD, cq *uverbs.CQ, qkey uint32) *uverbs.QP {
	t.Helper()
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, QKey: qkey}, uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrQKey},
		{uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 7}, uverbs.QPAttrState | uverbs.QPAttrSQPSN},
	} {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("UD Modify to %v: %v", s.attr.State, err)
		}
	}
	return qp
}

// TestVMUDSendAH: a UD datagram through an address handle (RoCE v2, GID 1
// of rxe0) arrives with the 40-byte GRH in front, the sender's QPN in
// SrcQP, and the payload intact; a wrong Q_Key drops it silently.
func TestVMUDSendAH(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(32, nil)
	if err != nil {
		t.Fatal(err)
	}
	const qkey = 0x11111111
	a := udQP(t, pd, cq, qkey)
	b := udQP(t, pd, cq, qkey)
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := pd.CreateAH(uverbs.AHAttr{DGID: g.GID, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20, FlowLabel: 0x12345, IsGlobal: true, PortNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8192)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	payload := buf[4096 : 4096+512]
	fill(payload, 42)
	if err := b.PostRecv([]uverbs.RecvWR{{ID: 77, SGL: []uverbs.SGE{sge(mr, 0, 40+1024)}}}); err != nil {
		t.Fatal(err)
	}
	wc := one(t, a, cq, uverbs.SendWR{ID: 5, Opcode: uverbs.WRSendWithImm, ImmData: 99, AH: ah, RemoteQPN: b.QPN(), RemoteQKey: qkey,
		SGL: []uverbs.SGE{sge(mr, 4096, 512)}})
	var rc uverbs.WC
	if wc.ID == 77 { // the receive may complete first on the shared CQ
		rc, wc = wc, pollN(t, cq, 1)[0]
	} else {
		rc = pollN(t, cq, 1)[0]
	}
	if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend || wc.ID != 5 {
		t.Fatalf("UD send completion %+v (%v)", wc, wc.Status)
	}
	if rc.Status != uverbs.WCSuccess || rc.ID != 77 || rc.ByteLen != 40+512 || rc.SrcQP != a.QPN() || rc.QPNum != b.QPN() ||
		rc.Flags&uverbs.WCGRH == 0 || rc.ImmData != 99 {
		t.Fatalf("UD receive completion %+v", rc)
	}
	if !bytes.Equal(buf[40:40+512], payload) {
		t.Fatal("UD payload differs")
	}
	// A datagram with the wrong Q_Key is dropped: the send completes,
	// nothing is received.
	if err := b.PostRecv([]uverbs.RecvWR{{ID: 78, SGL: []uverbs.SGE{sge(mr, 0, 1064)}}}); err != nil {
		t.Fatal(err)
	}
	wc = one(t, a, cq, uverbs.SendWR{ID: 6, Opcode: uverbs.WRSend, AH: ah, RemoteQPN: b.QPN(), RemoteQKey: qkey + 1, SGL: []uverbs.SGE{sge(mr, 4096, 16)}})
	if wc.Status != uverbs.WCSuccess || wc.ID != 6 {
		t.Fatalf("send with a wrong qkey: %+v", wc)
	}
	// Then one with the right Q_Key: the receive takes it, not the
	// first (rxe carries both in order from a to b), so the first was
	// dropped rather than late.
	if err := a.PostSend([]uverbs.SendWR{{ID: 7, Opcode: uverbs.WRSendWithImm, ImmData: 100, Flags: uverbs.SendSignaled,
		AH: ah, RemoteQPN: b.QPN(), RemoteQKey: qkey, SGL: []uverbs.SGE{sge(mr, 4096, 8)}}}); err != nil {
		t.Fatal(err)
	}
	for _, wc := range pollN(t, cq, 2) {
		switch {
		case wc.ID == 7 && wc.Status == uverbs.WCSuccess && wc.Opcode == uverbs.WCSend:
		case wc.ID == 78 && wc.Status == uverbs.WCSuccess && wc.Flags&uverbs.WCWithImm != 0 && wc.ImmData == 100 && wc.ByteLen == 40+8:
		case wc.ID == 78:
			t.Fatalf("a datagram with the wrong Q_Key was received: %+v", wc)
		default:
			t.Fatalf("completion %+v (%v)", wc, wc.Status)
		}
	}
	for _, q := range []*uverbs.QP{a, b} {
		if err := q.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ah.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Dereg(); err != nil {
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
