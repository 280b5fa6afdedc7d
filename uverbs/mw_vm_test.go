package uverbs_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// mwBed is a PD with a buffer registered for windows and a looped-back RC
// QP that a remote access error can replace.
type mwBed struct {
	t   *testing.T
	c   *uverbs.Context
	pd  *uverbs.PD
	buf []byte
	mr  *uverbs.MR
	qp  *uverbs.QP
	cq  *uverbs.CQ
	old []*uverbs.QP
	cqs []*uverbs.CQ
}

// fresh replaces the QP (after an error moved it to ERR).
func (b *mwBed) fresh() {
	b.t.Helper()
	if b.qp != nil {
		b.old, b.cqs = append(b.old, b.qp), append(b.cqs, b.cq)
	}
	b.qp, b.cq = loopQP(b.t, b.c, b.pd, 64, 16, 16)
}

// write RDMA-writes n bytes from offset 0 of the buffer to addr under rkey
// and returns the completion.
func (b *mwBed) write(addr uint64, rkey uint32, n int) uverbs.WC {
	b.t.Helper()
	return one(b.t, b.qp, b.cq, uverbs.SendWR{ID: 50, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{sge(b.mr, 0, n)},
		RemoteAddr: addr, RKey: rkey})
}

// mustWrite is write that must succeed and land.
func (b *mwBed) mustWrite(what string, off int, rkey uint32, n int) {
	b.t.Helper()
	fill(b.buf[:n], byte(off))
	if wc := b.write(b.mr.Addr()+uint64(off), rkey, n); wc.Status != uverbs.WCSuccess {
		b.t.Fatalf("%s: RDMA write through rkey %#x: %v", what, rkey, wc.Status)
	}
	if !bytes.Equal(b.buf[off:off+n], b.buf[:n]) {
		b.t.Fatalf("%s: the written bytes did not land", what)
	}
}

// refused is write that the responder must refuse, leaving the target
// untouched: a remote access error, which moves the QP to ERR (the bed
// gets a new one). On 6.12 the looped-back QP's responder may move it to
// ERR before the requester takes the NAK, which then completes the write
// as flushed: either is a refusal.
func (b *mwBed) refused(what string, off int, rkey uint32) {
	b.t.Helper()
	fill(b.buf[:64], 0x5a)
	inside := off+64 <= len(b.buf)
	if inside {
		for i := off; i < off+64; i++ {
			b.buf[i] = 0xee
		}
	}
	wc := b.write(b.mr.Addr()+uint64(off), rkey, 64)
	if wc.Status != uverbs.WCRemAccessErr && wc.Status != uverbs.WCWRFlushErr {
		b.t.Fatalf("%s: RDMA write through rkey %#x: %v, want remote access error", what, rkey, wc.Status)
	}
	if inside && !bytes.Equal(b.buf[off:off+64], bytes.Repeat([]byte{0xee}, 64)) {
		b.t.Fatalf("%s: a refused write changed the target", what)
	}
	b.fresh()
}

// TestVMMemoryWindows: type 1 and type 2 memory windows on rxe. A window
// grants remote access only to its range and only once bound; rebinding a
// type 1 window (QP.BindMW) gives it a new rkey and retires the old one; a
// type 2 window is bound by a WRBindMW request and freed by a local
// invalidate or by the peer's send with invalidate, whose receive reports
// the invalidated rkey; what the library refuses before the kernel sees
// it; the PD's EBUSY names the live window; Dealloc twice.
func TestVMMemoryWindows(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16384)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	b := &mwBed{t: t, c: c, pd: pd, buf: buf, mr: mr}
	b.fresh()
	win := func(off, n int) uverbs.MWBindInfo {
		return uverbs.MWBindInfo{MR: mr, Addr: mr.Addr() + uint64(off), Length: uint64(n), Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead}
	}

	// Type 1.
	mw1, err := pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatalf("AllocMW(type 1): %v", err)
	}
	if mw1.Type() != uverbs.MWType1 || mw1.PD() != pd || mw1.Context() != c {
		t.Fatalf("type 1 window: %v %p %p", mw1.Type(), mw1.PD(), mw1.Context())
	}
	b.refused("type 1, unbound", 4096, mw1.RKey())
	rk0 := mw1.RKey()
	rk1, err := b.qp.BindMW(mw1, 7, uverbs.SendSignaled, win(4096, 2048))
	if err != nil {
		t.Fatalf("BindMW: %v", err)
	}
	if rk1 != uverbs.IncRKey(rk0) || rk1 == rk0 || rk1>>8 != rk0>>8 || mw1.RKey() != rk1 {
		t.Fatalf("rkey %#x after a bind, was %#x, MW says %#x", rk1, rk0, mw1.RKey())
	}
	if wc := pollN(t, b.cq, 1)[0]; wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCBindMW || wc.ID != 7 {
		t.Fatalf("bind completion %+v (%v)", wc, wc.Status)
	}
	b.mustWrite("type 1 bound", 4096, rk1, 512)
	b.mustWrite("type 1 bound, its end", 4096+2048-64, rk1, 64)
	if wc := one(t, b.qp, b.cq, uverbs.SendWR{ID: 51, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{sge(mr, 8192, 256)},
		RemoteAddr: mr.Addr() + 4096, RKey: rk1}); wc.Status != uverbs.WCSuccess || !bytes.Equal(buf[8192:8192+256], buf[4096:4096+256]) {
		t.Fatalf("RDMA read through the window: %v", wc.Status)
	}
	// rxe checks an access through a window against the MR's range, not
	// the window's (check_rkey's mr_check_range, 6.1 and 6.12): outside
	// the window but inside the MR goes through. Past the MR is refused.
	for _, off := range []int{4096 - 64, 4096 + 2048} {
		wc := b.write(mr.Addr()+uint64(off), rk1, 64)
		t.Logf("through the window, outside it but inside the MR (offset %d): %v", off, wc.Status)
		if wc.Status != uverbs.WCSuccess {
			b.fresh()
		}
	}
	b.refused("type 1, past the MR", 16384-32, rk1)
	b.refused("an rkey of no window or region", 256, mr.RKey()^0x100)
	rk2, err := b.qp.BindMW(mw1, 8, uverbs.SendSignaled, win(12288, 1024))
	if err != nil {
		t.Fatal(err)
	}
	if wc := pollN(t, b.cq, 1)[0]; wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCBindMW {
		t.Fatalf("rebind completion %+v (%v)", wc, wc.Status)
	}
	b.mustWrite("type 1 rebound", 12288, rk2, 1024)
	b.refused("type 1, the rkey of the earlier bind", 4096, rk1)

	// Type 2: bound by a work request, invalidated locally.
	mw2, err := pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatalf("AllocMW(type 2): %v", err)
	}
	bind2 := func(id uint64) uint32 {
		t.Helper()
		rk := uverbs.IncRKey(mw2.RKey())
		if wc := one(t, b.qp, b.cq, uverbs.SendWR{ID: id, Opcode: uverbs.WRBindMW, BindMW: mw2, BindRKey: rk, BindInfo: win(8192, 4096)}); wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCBindMW {
			t.Fatalf("type 2 bind: %+v (%v)", wc, wc.Status)
		}
		mw2.SetRKey(rk)
		return rk
	}
	rkA := bind2(9)
	b.mustWrite("type 2 bound", 8192, rkA, 4096)
	if wc := one(t, b.qp, b.cq, uverbs.SendWR{ID: 10, Opcode: uverbs.WRLocalInv, InvalidateRKey: rkA}); wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCLocalInv {
		t.Fatalf("local invalidate: %+v (%v)", wc, wc.Status)
	}
	b.refused("type 2, invalidated locally", 8192, rkA)

	// Type 2 again, invalidated by the peer's send with invalidate (the
	// looped-back QP is its own peer).
	rkB := bind2(11)
	if rkB == rkA {
		t.Fatal("the second bind reused the rkey")
	}
	b.mustWrite("type 2 bound again", 8192, rkB, 256)
	if err := b.qp.PostRecv([]uverbs.RecvWR{{ID: 12, SGL: []uverbs.SGE{sge(mr, 0, 64)}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.qp.PostSend([]uverbs.SendWR{{ID: 13, Opcode: uverbs.WRSendWithInv, Flags: uverbs.SendSignaled, InvalidateRKey: rkB,
		SGL: []uverbs.SGE{sge(mr, 1024, 32)}}}); err != nil {
		t.Fatal(err)
	}
	var recv *uverbs.WC
	for _, wc := range pollN(t, b.cq, 2) {
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("send with invalidate: %+v (%v)", wc, wc.Status)
		}
		if wc.Opcode == uverbs.WCRecv {
			recv = &wc
		}
	}
	if recv == nil || recv.Flags&uverbs.WCWithInvalidate == 0 || recv.ImmData != rkB || recv.ByteLen != 32 {
		t.Fatalf("the receive of a send with invalidate: %+v", recv)
	}
	b.refused("type 2, invalidated by the peer", 8192, rkB)

	// Refused by the library, nothing posted.
	other, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mwOther, err := other.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"type 2 through BindMW": func() error { _, err := b.qp.BindMW(mw2, 1, 0, win(0, 64)); return err },
		"window of another PD":  func() error { _, err := b.qp.BindMW(mwOther, 1, 0, win(0, 64)); return err },
		"MR without MW_BIND": func() error {
			_, err := b.qp.BindMW(mw1, 1, 0, uverbs.MWBindInfo{MR: plain, Addr: plain.Addr(), Length: 64, Access: uverbs.AccessRemoteWrite})
			return err
		},
		"range past the MR": func() error { _, err := b.qp.BindMW(mw1, 1, 0, win(16384-32, 64)); return err },
		"zero-based": func() error {
			w := win(0, 64)
			w.Access |= uverbs.AccessZeroBased
			_, err := b.qp.BindMW(mw1, 1, 0, w)
			return err
		},
		"address without MR": func() error {
			_, err := b.qp.BindMW(mw1, 1, 0, uverbs.MWBindInfo{Addr: 1, Length: 1})
			return err
		},
		"bind rkey of another index": func() error {
			return b.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, BindMW: mw2, BindRKey: mw2.RKey() + 0x100, BindInfo: win(0, 64)}})
		},
		"bind without a window": func() error { return b.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, BindInfo: win(0, 64)}}) },
		"bind with data": func() error {
			return b.qp.PostSend([]uverbs.SendWR{{Opcode: uverbs.WRBindMW, BindMW: mw2, BindRKey: uverbs.IncRKey(mw2.RKey()), BindInfo: win(0, 64), SGL: []uverbs.SGE{sge(mr, 0, 8)}}})
		},
		"unknown type": func() error { _, err := pd.AllocMW(3); return err },
	} {
		if err := f(); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	ud := udQP(t, pd, b.cq, 0x33)
	for _, op := range []uverbs.WROpcode{uverbs.WRLocalInv, uverbs.WRBindMW, uverbs.WRSendWithInv} {
		if err := ud.PostSend([]uverbs.SendWR{{Opcode: op, BindMW: mw2, InvalidateRKey: 1}}); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("%v on a UD QP: %v", op, err)
		}
	}
	// An MR of another PD: ibv_bind_mw's EPERM.
	otherMR, err := other.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.qp.BindMW(mw1, 1, 0, uverbs.MWBindInfo{MR: otherMR, Addr: otherMR.Addr(), Length: 64, Access: uverbs.AccessRemoteWrite}); !errors.Is(err, uverbs.ErrInvalid) || !errors.Is(err, sys.EPERM) {
		t.Errorf("MR of another PD: %v, want ErrInvalid and EPERM", err)
	}
	if err := otherMR.Dereg(); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.cq.Poll(make([]uverbs.WC, 4)); n != 0 {
		t.Fatalf("%d completions of requests that were refused", n)
	}
	// A zero length unbinds, whatever the MR's access (the kernel looks
	// no further at it): accepted, and it completes.
	if _, err := b.qp.BindMW(mw1, 0x77, uverbs.SendSignaled, uverbs.MWBindInfo{MR: plain}); err != nil {
		t.Fatalf("unbind naming an MR without MW_BIND: %v", err)
	}
	if wc := pollN(t, b.cq, 1)[0]; wc.ID != 0x77 || wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCBindMW {
		t.Fatalf("the unbind's completion: %+v", wc)
	}

	// The PD is busy while windows live; Dealloc twice.
	if err := pd.Dealloc(); !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "2 MWs") {
		t.Errorf("Dealloc of a PD with two windows: %v", err)
	}
	for _, w := range []*uverbs.MW{mw1, mw2, mwOther} {
		if err := w.Dealloc(); err != nil {
			t.Fatal(err)
		}
		if err := w.Dealloc(); !errors.Is(err, uverbs.ErrClosed) {
			t.Fatalf("second Dealloc: %v", err)
		}
	}
	if _, err := b.qp.BindMW(mw1, 1, 0, win(0, 64)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("bind of a deallocated window: %v", err)
	}
	for _, q := range append(b.old, b.qp, ud) {
		if err := q.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range append(b.cqs, b.cq) {
		if err := q.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []*uverbs.MR{mr, plain} {
		if err := m.Dereg(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*uverbs.PD{pd, other} {
		if err := p.Dealloc(); err != nil {
			t.Fatal(err)
		}
	}
	waitResources(t, base)
}
