package uverbs

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// The rxe data path: work requests are written straight into the rings
// the kernel mapped (rdma_user_rxe.h), as librxe does. A post list ends
// with one store-release of the producer index and, for sends, one raw
// write() of the POST_SEND command as the doorbell; receives and polls
// make no system call.

// Offsets in rxe WQEs beyond the fixed headers.
const (
	rxeSendWQEHdr = 208 // sizeof(struct rxe_send_wqe): SGEs or inline data follow
	rxeRecvWQEHdr = 40  // sizeof(struct rxe_recv_wqe): SGEs follow
	rxeSGESize    = 16
	// sizeof(struct ibv_send_wr) on 64-bit, which librxe puts in the
	// doorbell's wqe_size (kernels with the 2025 backports reject < 56).
	rxeDoorbellWQESize = 128
)

type rxeCQ struct {
	resp abi.RxeCreateCqResp
	q    rxeQueue
	mu   sync.Mutex // serialises pollers
	ring rxeRing    // set by created, before the CQ is published; mu's
	// view is what the lock-free readers (empty, snap, moved) see of the
	// ring. It is replaced, not changed, when a resize maps a new ring;
	// view0 is the first one (no allocation per CQ).
	view  atomic.Pointer[rxeCQView]
	view0 rxeCQView
	// consumed counts the completions ever polled (unwrapped; less the
	// view's base, its low bits mirror ring.own, the consumer index) for
	// empty and moved, which read it without mu.
	consumed atomic.Uint64
	// rresp is the RESIZE_CQ driver response (struct rxe_resize_cq_resp:
	// the new ring's mmap information), written under the CQ's exclusive
	// hold.
	rresp abi.RxeResizeCqResp
	lost  bool // a resize could not map the new ring (mu's)
}

// rxeCQView is an immutable picture of a CQ ring for the readers that take
// no lock. It keeps the ring's Mapping reachable, so its words stay
// readable (sys.Mapping) however long a reader holds the view.
type rxeCQView struct {
	m    *sys.Mapping
	prod *atomic.Uint32 // the kernel's producer index
	mask uint32
	// base: the ring's consumer index is uint32(consumed)-base, masked
	// (0 until a resize: a new ring starts at its own index).
	base uint32
	lost bool // no ring: never empty, never watchable
}

// errCQRingLost is what polls of a CQ return after a resize whose new ring
// could not be mapped: the old ring is stale and the new one unreachable.
var errCQRingLost = fmt.Errorf("%w: the CQ's resized ring could not be mapped; destroy the CQ", ErrInvalid)

// lostWord backs the view of a CQ without a ring: its producer index reads
// 1 against a consumer index of 0, so the empty poll sends every Poll on
// to poll, which reports errCQRingLost.
var lostWord = func() *atomic.Uint32 { w := new(atomic.Uint32); w.Store(1); return w }()

func (d *rxeCQ) udataIn() []byte  { return nil }
func (d *rxeCQ) udataOut() []byte { return sys.AsBytes(&d.resp) }
func (d *rxeCQ) created(c *Context) error {
	d.q.mi = d.resp.Mi
	if err := d.q.mapQueue(c, "cq", "cq ring"); err != nil {
		return err
	}
	if err := d.attach(d.q.m); err != nil {
		d.q.unmap()
		return &OpError{Object: "cq", Method: "create", Err: err}
	}
	return nil
}

// attach makes m, the CQ's first ring, the one polled and watched.
func (d *rxeCQ) attach(m *sys.Mapping) error {
	if err := d.ring.init(m, false); err != nil {
		return err
	}
	d.consumed.Store(uint64(d.ring.own))
	d.publish(&d.view0)
	return nil
}
func (d *rxeCQ) release() error { return d.q.unmap() }

// publish fills v from the ring and makes it the view (mu held, or the
// CQ not yet published).
func (d *rxeCQ) publish(v *rxeCQView) {
	r := &d.ring
	*v = rxeCQView{m: r.m, prod: r.otherW, mask: r.mask, base: uint32(d.consumed.Load()) - r.own}
	d.view.Store(v)
}

// resizeOut returns the RESIZE_CQ driver response buffer (the caller holds
// the CQ exclusively).
func (d *rxeCQ) resizeOut() []byte {
	d.rresp = abi.RxeResizeCqResp{}
	return sys.AsBytes(&d.rresp)
}

// resized runs after a successful RESIZE_CQ, under the CQ's exclusive
// hold: the kernel copied the completions waiting in the old ring to the
// start of a new one (rxe_queue_resize) and writes only there now. Map the
// new ring and retire the old (readers holding its view still read it
// safely). If the new ring cannot be mapped the CQ is left without one:
// polls fail rather than read the stale ring, which would return the
// copied completions twice.
func (d *rxeCQ) resized(c *Context) error {
	nq := rxeQueue{mi: d.rresp.Mi}
	if err := nq.mapQueue(c, "cq", "resized cq ring"); err != nil {
		d.replace(rxeQueue{}, err)
		return err
	}
	return d.replace(nq, nil)
}

// replace retires the CQ's ring and polls nq's from now on; with a
// mapping error (or a new ring whose header is wrong) the CQ has no ring.
func (d *rxeCQ) replace(nq rxeQueue, err error) error {
	var r rxeRing
	if err == nil {
		if err = r.init(nq.m, false); err != nil {
			nq.unmap()
			err = &OpError{Object: "cq", Method: "resize", Err: err}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.q.unmap()
	if err != nil {
		d.q, d.ring, d.lost = rxeQueue{}, rxeRing{}, true
		d.view.Store(&rxeCQView{prod: lostWord, mask: 1, base: uint32(d.consumed.Load()), lost: true})
		return err
	}
	d.q, d.ring, d.lost = nq, r, false // a later resize can bring a lost CQ back
	d.publish(new(rxeCQView))
	return nil
}

// poll decodes up to len(wcs) completions out of the ring (rxe_poll_cq),
// each where the kernel wrote it: the slot is the consumer's until advance
// gives it back.
func (d *rxeCQ) poll(wcs []WC) (int, error) {
	d.mu.Lock()
	if d.lost {
		d.mu.Unlock()
		return 0, errCQRingLost
	}
	r := &d.ring
	n := min(r.ready(), uint32(min(len(wcs), 1<<30)))
	for i := uint32(0); i < n; i++ {
		decodeWC(sys.Ptr[abi.IbUverbsWc](r.m, r.slot(i)), &wcs[i])
	}
	if n > 0 {
		// consumed first: once advance hands the slots back the kernel may
		// fill them, and empty, reading the producer index against a
		// consumed count not yet moved, would see n+k new completions as
		// none when n+k is the ring's size.
		d.consumed.Add(uint64(n))
		hook("cq:polled")
		r.advance(n)
	}
	d.mu.Unlock()
	return int(n), nil
}

// empty compares the kernel's producer index with the consumer index of
// the last poll: two loads through the view, no lock. A stale consumer
// index or view can only make it answer false (the caller then polls under
// the lock), or answer as of a moment before a concurrent resize: poll
// counts what it consumed before it gives the slots back.
func (d *rxeCQ) empty() bool {
	v := d.view.Load()
	return v.prod.Load()&v.mask == (uint32(d.consumed.Load())-v.base)&v.mask
}

// snap records the ring before an arm: the completions polled so far,
// then the producer index, and how many completions were waiting between
// the two (all of them older than the arm). A CQ that lost its ring cannot
// be watched.
func (d *rxeCQ) snap() (ringSnap, bool) {
	v := d.view.Load()
	if v.lost {
		return ringSnap{}, false
	}
	cons := d.consumed.Load() // first: see moved
	prod := v.prod.Load() & v.mask
	return ringSnap{polled: cons, prod: prod, waiting: (prod - (uint32(cons) - v.base)) & v.mask}, true
}

// moved reports whether a completion may have entered the ring since s
// was taken. The producer index alone cannot say: after exactly a lap it
// reads the same. But a ring never holds more than mask completions, so
// the producer cannot complete a lap unless the consumer took at least one
// completion newer than s, i.e. more than s.waiting since s. A snapshot is
// never compared with another ring's view: a resize first turns the CQ's
// arm into a possible event (CompChannel.resizing).
func (d *rxeCQ) moved(s ringSnap) bool {
	v := d.view.Load()
	return v.prod.Load()&v.mask != s.prod || d.consumed.Load()-s.polled > uint64(s.waiting)
}

// ready returns the number of completions waiting in the ring.
func (d *rxeCQ) ready() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lost {
		return 0
	}
	return int(d.ring.ready())
}

// decodeWC converts the ib_uverbs_wc part of an rxe CQE.
func decodeWC(c *abi.IbUverbsWc, wc *WC) {
	*wc = WC{
		ID:           c.WrId,
		Status:       WCStatus(c.Status),
		Opcode:       WCOpcode(c.Opcode),
		VendorErr:    c.VendorErr,
		ByteLen:      c.ByteLen,
		QPNum:        c.QpNum,
		SrcQP:        c.SrcQp,
		Flags:        WCFlags(c.WcFlags),
		PKeyIndex:    c.PkeyIndex,
		SLID:         c.Slid,
		SL:           c.Sl,
		DLIDPathBits: c.DlidPathBits,
		PortNum:      c.PortNum,
	}
	switch {
	case wc.Flags&WCWithImm != 0:
		// imm_data is big-endian on the wire and in the CQE.
		wc.ImmData = bits.ReverseBytes32(c.Ex.ImmData())
	case wc.Flags&WCWithInvalidate != 0:
		wc.ImmData = c.Ex.InvalidateRkey()
	}
}

type rxeQP struct {
	resp   abi.RxeCreateQpResp
	sq, rq rxeQueue

	sqMu   sync.Mutex // serialises senders; guards sqRing
	sqRing *rxeRing
	db     rxeDoorbell // set by created, then read-only
	dbResp abi.IbUverbsPostSendResp

	rqMu   sync.Mutex // serialises receivers; guards rqRing
	rqRing *rxeRing
}

// rxeDoorbell is the 32-byte legacy POST_SEND write librxe issues
// (post_send_db): a header, then ib_uverbs_post_send with no work
// requests, which makes the kernel run the QP's requester on the ring.
type rxeDoorbell struct {
	hdr abi.IbUverbsCmdHdr
	cmd abi.IbUverbsPostSend
}

// setDoorbell builds the QP's doorbell once: it never changes, and every
// post writes it as is.
func (d *rxeQP) setDoorbell(handle uint32) {
	d.db.hdr = abi.IbUverbsCmdHdr{Command: abi.IB_USER_VERBS_CMD_POST_SEND, InWords: 8, OutWords: 1}
	d.db.cmd = abi.IbUverbsPostSend{Response: sys.PtrAddr(&d.dbResp), QpHandle: handle, WqeSize: rxeDoorbellWQESize}
}

// rxe requires an empty UHW_IN for QP create.
func (d *rxeQP) udataIn() []byte  { return nil }
func (d *rxeQP) udataOut() []byte { return sys.AsBytes(&d.resp) }
func (d *rxeQP) created(c *Context, handle uint32, hasSRQ bool) error {
	d.setDoorbell(handle)
	d.sq.mi = d.resp.SqMi
	if err := d.sq.mapQueue(c, "qp", "send queue"); err != nil {
		return err
	}
	var err error
	if d.sqRing, err = newRxeRing(d.sq.m, true); err != nil {
		d.sq.unmap()
		return &OpError{Object: "qp", Method: "create", Err: err}
	}
	if !hasSRQ {
		d.rq.mi = d.resp.RqMi
		if err := d.rq.mapQueue(c, "qp", "receive queue"); err != nil {
			d.sq.unmap()
			return err
		}
		if d.rqRing, err = newRxeRing(d.rq.m, true); err != nil {
			d.release()
			return &OpError{Object: "qp", Method: "create", Err: err}
		}
	}
	return nil
}

func (d *rxeQP) release() error {
	e1 := d.sq.unmap()
	e2 := d.rq.unmap()
	if e1 != nil {
		return e1
	}
	return e2
}

// postSend writes wrs to the send queue (librxe post_one_send), publishes
// them with one producer update and rings the doorbell once.
func (d *rxeQP) postSend(qp *QP, wrs []SendWR) error {
	d.sqMu.Lock()
	err := d.postSendLocked(qp, wrs)
	d.sqMu.Unlock()
	return err
}

func (d *rxeQP) postSendLocked(qp *QP, wrs []SendWR) error {
	r := d.sqRing
	free := r.free()
	var perr error
	n := 0
	for i := range wrs {
		// Validated before the room is checked, as librxe's
		// post_one_send: an invalid request on a full queue is EINVAL,
		// not ENOMEM. With none free, slot n is the one the ring always
		// keeps empty (it holds at most mask requests), which the kernel
		// does not read: writing there is harmless.
		if err := d.writeSend(qp, r, uint32(n), &wrs[i], i); err != nil {
			perr = err
			break
		}
		if uint32(n) == free {
			perr = &PostError{Op: "post_send", Index: i, Err: ErrQueueFull}
			break
		}
		n++
	}
	if n == 0 {
		return perr
	}
	r.advance(uint32(n))
	if err := d.ring(qp); err != nil {
		// The n requests are in the ring, where the kernel finds them at
		// the next doorbell, or flushes them when the QP enters ERR: they
		// are posted. The kernel refused the doorbell (rxe does below RTS:
		// a Modify that raced this post), or the device is gone. librxe
		// returns the doorbell's error and leaves bad_wr alone; here
		// Index stays after the posted requests.
		dbErr := qp.ctx.opErr("qp", "post_send", err)
		if pe, ok := perr.(*PostError); ok {
			pe.Err = errors.Join(pe.Err, dbErr)
			return pe
		}
		return &PostError{Op: "post_send", Index: n, Err: dbErr}
	}
	return perr
}

func (d *rxeQP) ring(qp *QP) error { return sys.WriteHeldValue(qp.ctx.cmd, &d.db) }

// writeSend validates wr and writes it into slot i after the producer,
// in place as librxe does: the slot is free (the kernel retires a send WQE,
// moving the consumer index past it, only after its completion), and the
// kernel reads it only once advance publishes it, so a request found
// invalid half-way leaves nothing the kernel sees.
func (d *rxeQP) writeSend(qp *QP, r *rxeRing, i uint32, wr *SendWR, idx int) error {
	off := r.slot(i)
	w := sys.Ptr[abi.RxeSendWqe](r.m, off)
	*w = abi.RxeSendWqe{}
	w.Wr.WrId = wr.ID
	w.Wr.Opcode = uint32(wr.Opcode)
	w.Wr.SendFlags = uint32(wr.Flags)
	typ := qp.typ
	switch wr.Opcode {
	case WRSend, WRSendWithImm:
		if typ == QPTypeUD {
			ah := wr.AH
			if ah == nil || ah.pd != qp.pd {
				return badWR("post_send", idx, "a UD send needs an address handle of the QP's PD")
			}
			// Held while its number is written, so a concurrent Destroy
			// cannot free a number the kernel would give the next AH.
			if !ah.hold() {
				return &PostError{Op: "post_send", Index: idx, Err: closedErr("ah", "post_send")}
			}
			if ah.num == 0 {
				// Kernels before 5.10 return no ah_num and want the
				// address vector in every WQE; ours all return one.
				ah.drop()
				return badWR("post_send", idx, "the kernel gave the AH no ah_num (legacy address vectors are not supported)")
			}
			w.Wr.Wr.SetUd(abi.RxeSendWrWrUd{RemoteQpn: wr.RemoteQPN, RemoteQkey: wr.RemoteQKey, AhNum: ah.num})
			ah.drop()
		}
	case WRRDMAWrite, WRRDMAWriteWithImm:
		if typ == QPTypeUD {
			return badWR("post_send", idx, "%v on a UD QP", wr.Opcode)
		}
		w.Wr.Wr.SetRdma(abi.RxeSendWrWrRdma{RemoteAddr: wr.RemoteAddr, Rkey: wr.RKey})
		w.Iova = wr.RemoteAddr
	case WRRDMARead:
		if typ != QPTypeRC {
			return badWR("post_send", idx, "%v needs an RC QP", wr.Opcode)
		}
		w.Wr.Wr.SetRdma(abi.RxeSendWrWrRdma{RemoteAddr: wr.RemoteAddr, Rkey: wr.RKey})
		w.Iova = wr.RemoteAddr
	case WRAtomicCmpAndSwp, WRAtomicFetchAndAdd:
		if typ != QPTypeRC {
			return badWR("post_send", idx, "%v needs an RC QP", wr.Opcode)
		}
		if wr.RemoteAddr%8 != 0 {
			return badWR("post_send", idx, "atomic remote address %#x is not 8-byte aligned", wr.RemoteAddr)
		}
		// librxe wants at least 8 bytes for the original value, over
		// the SGEs together (validate_send_wr).
		var n uint64
		for _, g := range wr.SGL {
			n += uint64(g.Length)
		}
		if n < 8 || wr.Flags&SendInline != 0 {
			return badWR("post_send", idx, "an atomic takes SGEs of at least 8 bytes in all for the original value, not inline data")
		}
		w.Wr.Wr.SetAtomic(abi.RxeSendWrWrAtomic{RemoteAddr: wr.RemoteAddr, CompareAdd: wr.CompareAdd, Swap: wr.Swap, Rkey: wr.RKey})
		w.Iova = wr.RemoteAddr
	case WRSendWithInv:
		if typ != QPTypeRC {
			return badWR("post_send", idx, "%v needs an RC QP", wr.Opcode)
		}
		w.Wr.Ex.SetInvalidateRkey(wr.InvalidateRKey)
	case WRLocalInv:
		if typ != QPTypeRC {
			return badWR("post_send", idx, "%v needs an RC QP", wr.Opcode)
		}
		if len(wr.SGL) != 0 || len(wr.Inline) != 0 {
			return badWR("post_send", idx, "%v carries no data", wr.Opcode)
		}
		if wr.Flags&^(SendFence|SendSignaled|SendSolicited) != 0 {
			return badWR("post_send", idx, "send flags %#x on a local invalidate", uint32(wr.Flags))
		}
		w.Wr.Ex.SetInvalidateRkey(wr.InvalidateRKey)
		return nil
	case WRBindMW:
		return d.writeBind(qp, w, wr, idx)
	default:
		return badWR("post_send", idx, "opcode %v not supported by rxe", wr.Opcode)
	}
	if wr.Opcode == WRSendWithImm || wr.Opcode == WRRDMAWriteWithImm {
		w.Wr.Ex.SetImmData(bits.ReverseBytes32(wr.ImmData)) // big-endian bytes
	}
	if wr.Flags&^(SendFence|SendSignaled|SendSolicited|SendInline|SendIPCsum) != 0 {
		return badWR("post_send", idx, "unknown send flags %#x", uint32(wr.Flags))
	}
	room := r.slotSize() - rxeSendWQEHdr
	var total uint64
	if wr.Flags&SendInline != 0 {
		if len(wr.SGL) != 0 {
			return badWR("post_send", idx, "an inline request carries its payload in Inline, not in SGL")
		}
		if wr.Opcode == WRRDMARead {
			return badWR("post_send", idx, "RDMA read cannot be inline")
		}
		if len(wr.Inline) > qp.cap.MaxInlineData || len(wr.Inline) > room {
			return badWR("post_send", idx, "%d inline bytes, the QP takes %d", len(wr.Inline), qp.cap.MaxInlineData)
		}
		total = uint64(len(wr.Inline))
		r.m.WriteAt(wr.Inline, off+rxeSendWQEHdr)
	} else {
		if len(wr.Inline) != 0 {
			return badWR("post_send", idx, "Inline payload without the SendInline flag")
		}
		if len(wr.SGL) > qp.cap.MaxSendSGE || len(wr.SGL)*rxeSGESize > room {
			return badWR("post_send", idx, "%d SGEs, the QP takes %d", len(wr.SGL), qp.cap.MaxSendSGE)
		}
		for j := range wr.SGL {
			s := &wr.SGL[j]
			*sys.Ptr[abi.RxeSge](r.m, off+rxeSendWQEHdr+j*rxeSGESize) = abi.RxeSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
			total += uint64(s.Length)
		}
		w.Dma.NumSge = uint32(len(wr.SGL))
	}
	if total > 1<<31 {
		return badWR("post_send", idx, "message of %d bytes exceeds 2 GiB", total)
	}
	w.Dma.Length = uint32(total)
	w.Dma.Resid = uint32(total)
	return nil
}

// writeBind fills a BIND_MW WQE (librxe's bind): the window's current
// rkey, the rkey it takes, the MR's lkey and the range. The window and the
// MR are held while their keys are written, so that a concurrent
// Dealloc or Dereg cannot free keys the kernel would give new objects.
func (d *rxeQP) writeBind(qp *QP, w *abi.RxeSendWqe, wr *SendWR, idx int) error {
	if qp.typ != QPTypeRC && qp.typ != QPTypeUC {
		return badWR("post_send", idx, "%v needs an RC or UC QP", wr.Opcode)
	}
	mw, b := wr.BindMW, &wr.BindInfo
	if mw == nil || mw.pd != qp.pd {
		return badWR("post_send", idx, "a bind needs a memory window of the QP's PD")
	}
	if len(wr.SGL) != 0 || len(wr.Inline) != 0 {
		return badWR("post_send", idx, "%v carries no data", wr.Opcode)
	}
	if wr.ImmData != 0 {
		return badWR("post_send", idx, "%v carries no immediate data", wr.Opcode)
	}
	if wr.BindRKey&^0xff != mw.rkey.Load()&^0xff {
		return badWR("post_send", idx, "bind rkey %#x changes the window's index (its rkey is %#x): use IncRKey", wr.BindRKey, mw.rkey.Load())
	}
	if !mw.hold() {
		return &PostError{Op: "post_send", Index: idx, Err: closedErr("mw", "bind")}
	}
	defer mw.drop()
	// The MR is held first and its registration read once: the check and
	// the lkey written are of the same one, which a Rereg (it waits for
	// holders) cannot change in between.
	var lkey uint32
	st := &noMRState
	if b.MR != nil {
		if !b.MR.hold() {
			return &PostError{Op: "post_send", Index: idx, Err: closedErr("mr", "bind")}
		}
		defer b.MR.drop()
		st = b.MR.state()
		lkey = st.lkey
	}
	if err := b.checkWith(qp.pd, st); err != nil {
		return &PostError{Op: "post_send", Index: idx, Err: err}
	}
	w.Wr.Wr.SetMw(abi.RxeSendWrWrMw{Addr: b.Addr, Length: b.Length, MrLkey: lkey, MwRkey: mw.rkey.Load(), Rkey: wr.BindRKey, Access: uint32(b.Access)})
	if wr.Flags&^(SendFence|SendSignaled|SendSolicited) != 0 {
		return badWR("post_send", idx, "send flags %#x on a bind", uint32(wr.Flags))
	}
	return nil
}

// postRecv writes wrs to the receive queue (librxe rxe_post_one_recv) and
// publishes them with one producer update; no system call.
func (d *rxeQP) postRecv(qp *QP, wrs []RecvWR) error {
	d.rqMu.Lock()
	r := d.rqRing
	if r == nil {
		d.rqMu.Unlock()
		return badWR("post_recv", 0, "the QP takes its receives from an SRQ: post them there")
	}
	n, err := postRecvRing(r, qp.cap.MaxRecvSGE, wrs, "post_recv")
	if n > 0 {
		r.advance(uint32(n))
	}
	d.rqMu.Unlock()
	return err
}

// postRecvRing writes receive WQEs (for a QP's RQ or an SRQ) in place
// after the producer index, stopping at the first one that is invalid or
// does not fit; it returns how many it wrote.
func postRecvRing(r *rxeRing, maxSGE int, wrs []RecvWR, op string) (int, error) {
	free := r.free()
	room := r.slotSize() - rxeRecvWQEHdr
	for i := range wrs {
		if uint32(i) == free {
			return i, &PostError{Op: op, Index: i, Err: ErrQueueFull}
		}
		wr := &wrs[i]
		if len(wr.SGL) > maxSGE || len(wr.SGL)*rxeSGESize > room {
			return i, badWR(op, i, "%d SGEs, the queue takes %d", len(wr.SGL), maxSGE)
		}
		off := r.slot(uint32(i))
		var total uint64
		for j := range wr.SGL {
			s := &wr.SGL[j]
			*sys.Ptr[abi.RxeSge](r.m, off+rxeRecvWQEHdr+j*rxeSGESize) = abi.RxeSge{Addr: s.Addr, Length: s.Length, Lkey: s.LKey}
			total += uint64(s.Length)
		}
		if total >= math.MaxUint32 {
			// A receive larger than the largest message (2 GiB) is
			// legal, as librxe posts it, up to what the WQE's 32-bit
			// length holds (librxe's sum would wrap past it); a total
			// of MaxUint32 is also MR.SGE's mark of an SGE it could
			// not express.
			return i, badWR(op, i, "receive buffers of %d bytes: the WQE's 32-bit length holds less than 4 GiB", total)
		}
		w := sys.Ptr[abi.RxeRecvWqe](r.m, off)
		*w = abi.RxeRecvWqe{WrId: wr.ID}
		w.Dma.Length = uint32(total)
		w.Dma.Resid = uint32(total)
		w.Dma.NumSge = uint32(len(wr.SGL))
	}
	return len(wrs), nil
}
