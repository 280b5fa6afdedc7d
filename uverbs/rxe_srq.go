package uverbs

import (
	"sync"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// The rxe half of an SRQ (rdma_user_rxe.h): SRQ/CREATE takes no driver
// input and returns struct rxe_create_srq_resp (24 bytes: the receive
// ring's mminfo and the SRQ number); the ring is mapped once from the
// command fd, like a QP's receive queue. MODIFY_SRQ takes struct
// rxe_modify_srq_cmd (8 bytes), the user address of a struct mminfo that
// the kernel fills when it resizes the ring (IB_SRQ_MAX_WR): the new ring
// is then mapped and the old one dropped. The kernel insists on the
// payload for every modify of a user SRQ (EINVAL without it), so it is
// always sent, as rdma-core's rxe_modify_srq does.

func (rxeProvider) newSRQ() srqDriver {
	d := new(rxeSRQ)
	// The address never changes: d lives in the heap (new) and the SRQ
	// keeps it reachable for every MODIFY_SRQ that sends it.
	d.cmd.MmapInfoAddr = sys.PtrAddr(&d.newMi)
	return d
}

type rxeSRQ struct {
	resp abi.RxeCreateSrqResp
	q    rxeQueue // the receive ring; replaced by a resize

	cmd   abi.RxeModifySrqCmd // MODIFY_SRQ driver payload, immutable
	newMi abi.Mminfo          // written by the kernel on a resize

	mu   sync.Mutex // serialises posters
	ring rxeRing    // producer side of q.m, made with it (created, modified): posting allocates nothing
}

// postRecv writes receive WQEs to the SRQ's ring (librxe
// rxe_post_srq_recv); no system call. The caller holds the SRQ shared, so
// a resize, which replaces the ring under the exclusive hold, cannot run.
func (d *rxeSRQ) postRecv(srq *SRQ, wrs []RecvWR) error {
	d.mu.Lock()
	err := d.postRecvLocked(srq, wrs)
	d.mu.Unlock()
	return err
}

func (d *rxeSRQ) postRecvLocked(srq *SRQ, wrs []RecvWR) error {
	if d.q.m == nil {
		return &PostError{Op: "post_srq_recv", Index: 0, Err: closedErr("srq", "post_recv")}
	}
	n, err := postRecvRing(&d.ring, srq.attr.MaxSGE, wrs, "post_srq_recv")
	if n > 0 {
		d.ring.advance(uint32(n))
	}
	return err
}

func (d *rxeSRQ) udataIn() []byte  { return nil }
func (d *rxeSRQ) udataOut() []byte { return sys.AsBytes(&d.resp) }
func (d *rxeSRQ) srqNum() uint32   { return d.resp.SrqNum }

func (d *rxeSRQ) created(c *Context) error {
	d.q.mi = d.resp.Mi
	if err := d.q.mapQueue(c, "srq", "srq ring"); err != nil {
		return err
	}
	return d.useRing("create")
}

// useRing makes the producer side of the mapped ring (under the SRQ's
// exclusive hold, or before it is published); a ring whose header is wrong
// is dropped.
func (d *rxeSRQ) useRing(method string) error {
	if err := d.ring.init(d.q.m, true); err != nil {
		d.q.unmap()
		d.q, d.ring = rxeQueue{}, rxeRing{}
		return &OpError{Object: "srq", Method: method, Err: err}
	}
	return nil
}

func (d *rxeSRQ) modifyIn(mask SRQAttrMask) []byte {
	if mask&SRQAttrMaxWR != 0 {
		d.newMi = abi.Mminfo{} // under the SRQ's exclusive lock
	}
	return sys.AsBytes(&d.cmd)
}

func (d *rxeSRQ) modified(c *Context, mask SRQAttrMask) error {
	if mask&SRQAttrMaxWR == 0 {
		return nil
	}
	// The kernel copied the posted receives into a new ring and no longer
	// looks at the old one: map the new ring, then drop the old mapping
	// (its kernel buffer goes with it). If the new ring cannot be mapped
	// the SRQ is left without a ring: posting to it fails instead of
	// writing where the kernel no longer reads.
	nq := rxeQueue{mi: d.newMi}
	err := nq.mapQueue(c, "srq", "resized srq ring")
	d.q.unmap()
	if err != nil {
		d.q, d.ring = rxeQueue{}, rxeRing{}
		return err
	}
	d.q = nq
	return d.useRing("modify")
}

func (d *rxeSRQ) release() error { return d.q.unmap() }
