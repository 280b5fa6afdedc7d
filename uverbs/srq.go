package uverbs

import (
	"context"
	"fmt"
	"math"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// SRQAttr are the attributes of a shared receive queue (struct
// ibv_srq_attr).
type SRQAttr struct {
	// MaxWR is the number of outstanding receive work requests.
	MaxWR int
	// MaxSGE is the number of scatter entries per work request (fixed at
	// creation).
	MaxSGE int
	// Limit is the SRQ limit: once armed (Modify with SRQAttrLimit and a
	// non-zero Limit), the device reports IBV_EVENT_SRQ_LIMIT_REACHED
	// when fewer than Limit receives remain posted, and disarms it.
	// 0 means not armed.
	Limit int
}

// SRQAttrMask selects what SRQ.Modify changes (enum ibv_srq_attr_mask).
type SRQAttrMask uint32

const (
	// SRQAttrMaxWR resizes the SRQ to attr.MaxWR (IBV_SRQ_MAX_WR); the
	// device must report IBV_DEVICE_SRQ_RESIZE.
	SRQAttrMaxWR SRQAttrMask = 1 << 0
	// SRQAttrLimit arms the SRQ limit (IBV_SRQ_LIMIT).
	SRQAttrLimit SRQAttrMask = 1 << 1

	srqAttrMaskAll = SRQAttrMaxWR | SRQAttrLimit
)

// SRQ is a shared receive queue (struct ibv_srq, ibv_create_srq(3)): QPs
// created with QPInitAttr.SRQ take their receives from it.
//
// Its affiliated async events (IBV_EVENT_SRQ_LIMIT_REACHED,
// IBV_EVENT_SRQ_ERR) map back to it through its user handle (an
// async.Event's Element is the *SRQ); Destroy waits, as libibverbs does,
// until every such event that was read has been acknowledged.
type SRQ struct {
	ctx    *Context
	pd     *PD
	handle uint32
	uh     uint64
	srqn   uint32
	attr   SRQAttr
	drv    srqDriver
	users  users // attached QPs, for Destroy's EBUSY
	life
}

// srqDriver is the provider half of one SRQ.
type srqDriver interface {
	// udataIn and udataOut are the UHW buffers of SRQ/CREATE (nil for
	// none); they stay valid (heap) until created returns.
	udataIn() []byte
	udataOut() []byte
	// srqNum is the SRQ number the provider reported at creation.
	srqNum() uint32
	// created maps the receive ring; on error the caller destroys the
	// kernel object.
	created(c *Context) error
	// modifyIn returns the MODIFY_SRQ driver payload for mask. With
	// SRQAttrMaxWR it is called under the SRQ's exclusive lock.
	modifyIn(mask SRQAttrMask) []byte
	// modified runs after a successful MODIFY_SRQ; after a resize (under
	// the exclusive lock) it replaces the ring mapping.
	modified(c *Context, mask SRQAttrMask) error
	// release unmaps the ring; it is idempotent.
	release() error
	// postRecv writes receive requests to the ring (the caller holds the
	// SRQ shared).
	postRecv(srq *SRQ, wrs []RecvWR) error
}

// srqProvider is implemented by providers that support SRQs.
type srqProvider interface{ newSRQ() srqDriver }

func (a SRQAttr) fits() bool {
	for _, v := range []int{a.MaxWR, a.MaxSGE, a.Limit} {
		if v < 0 || v > math.MaxInt32 {
			return false
		}
	}
	return true
}

// CreateSRQ creates a shared receive queue in pd (ibv_create_srq(3)) with
// room for at least attr.MaxWR receives of attr.MaxSGE scatter entries;
// Attr returns what the device granted. attr.Limit is sent as given
// (ibv_create_srq(3) calls it irrelevant at creation; arm the limit with
// Modify). It sends the SRQ/CREATE ioctl with the context's async event
// fd and maps the provider's receive ring; if the mapping fails the SRQ is
// destroyed. Out-of-range sizes are ErrInvalid before any system call;
// sizes above the device's limits are the kernel's EINVAL.
func (pd *PD) CreateSRQ(attr SRQAttr) (*SRQ, error) {
	if pd == nil || pd.ctx == nil {
		return nil, invalidErr("srq", "create", "nil PD")
	}
	if !attr.fits() || attr.MaxWR < 1 {
		return nil, invalidErr("srq", "create", "attributes out of range: %+v", attr)
	}
	c := pd.ctx
	if c.Closed() {
		return nil, closedErr("srq", "create")
	}
	// The PD is held from before its handle is read until the SRQ is
	// published (see CreateQP).
	if !pd.hold() {
		return nil, closedErr("srq", "create")
	}
	defer pd.drop()
	p, err := c.provider("srq")
	if err != nil {
		return nil, err
	}
	sp, ok := p.(srqProvider)
	if !ok {
		return nil, &OpError{Object: "srq", Method: "create",
			Err: fmt.Errorf("%w: the %s provider has no SRQ support", ErrNotSupported, p.name())}
	}
	drv := sp.newSRQ()
	srq := &SRQ{ctx: c, pd: pd, drv: drv}
	// Reserved before the create command, so that an event of the new
	// SRQ read before CreateSRQ returns still finds it.
	uh, err := c.reg.Reserve(&srq.counts)
	if err != nil {
		return nil, closedErr("srq", "create")
	}
	srq.uh = uh
	hook("srq:before-create")

	var maxWR, maxSGE, srqn uint32
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_CREATE, c.driverID)
	ha := cmd.IDRNew(abi.UVERBS_ATTR_CREATE_SRQ_HANDLE)
	cmd.IDRIn(abi.UVERBS_ATTR_CREATE_SRQ_PD_HANDLE, pd.handle, true)
	cmd.ConstIn(abi.UVERBS_ATTR_CREATE_SRQ_TYPE, abi.IB_UVERBS_SRQT_BASIC, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_SRQ_USER_HANDLE, uh, 8, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_SRQ_MAX_WR, uint64(attr.MaxWR), 4, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_SRQ_MAX_SGE, uint64(attr.MaxSGE), 4, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_SRQ_LIMIT, uint64(attr.Limit), 4, true)
	cmd.FDIn(abi.UVERBS_ATTR_CREATE_SRQ_EVENT_FD, c.asyncRaw, false)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR, &maxWR, true)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE, &maxSGE, true)
	an := sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM, &srqn, false)
	if in := drv.udataIn(); len(in) > 0 {
		cmd.BytesIn(abi.UVERBS_ATTR_UHW_IN, in, true)
	}
	if out := drv.udataOut(); len(out) > 0 {
		cmd.BytesOut(abi.UVERBS_ATTR_UHW_OUT, out, true)
	}
	err = cmd.Exec(c.cmd)
	srq.handle = cmd.Handle(ha)
	// The kernel writes RESP_SRQ_NUM for XRC SRQs only; a basic SRQ's
	// number comes from the provider.
	numValid := cmd.Valid(an)
	c.put(cmd)
	if err != nil {
		c.reg.Abort(uh)
		return nil, c.limitErr(c.opErr("srq", "create", err), "srq", func(a *DeviceAttr) string {
			return c.overLimit(
				limitCheck{"max_wr", attr.MaxWR, a.MaxSRQWR, "max_srq_wr", "DeviceAttr.MaxSRQWR"},
				limitCheck{"max_sge", attr.MaxSGE, a.MaxSRQSGE, "max_srq_sge", "DeviceAttr.MaxSRQSGE"})
		})
	}
	srq.attr = SRQAttr{MaxWR: int(maxWR), MaxSGE: int(maxSGE), Limit: attr.Limit}
	srq.srqn = drv.srqNum()
	if numValid {
		srq.srqn = srqn
	}

	if err := drv.created(c); err != nil {
		srq.destroyCmd()
		drv.release()
		c.reg.Abort(uh)
		return nil, err
	}
	srq.release = drv
	hook("srq:created")
	if err := c.reg.Publish(uh, srq); err != nil {
		// Close ran meanwhile: the kernel SRQ goes with the command fd;
		// unmap the ring so nothing of it is left.
		drv.release()
		return nil, closedErr("srq", "create")
	}
	pd.users.srq.Add(1)
	return srq, nil
}

// destroyCmd sends SRQ/DESTROY and returns the kernel's event count.
func (srq *SRQ) destroyCmd() (resp abi.IbUverbsDestroySrqResp, err error) {
	c := srq.ctx
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_SRQ, abi.UVERBS_METHOD_SRQ_DESTROY, c.driverID)
	cmd.IDRIn(abi.UVERBS_ATTR_DESTROY_SRQ_HANDLE, srq.handle, true)
	out := sys.Scratch[abi.IbUverbsDestroySrqResp](cmd) // in the command: no allocation
	sys.PtrOut(cmd, abi.UVERBS_ATTR_DESTROY_SRQ_RESP, out, true)
	err = cmd.Exec(c.cmd)
	resp = *out
	c.put(cmd)
	if err != nil {
		return resp, c.opErr("srq", "destroy", err)
	}
	return resp, nil
}

// Destroy destroys the SRQ (ibv_destroy_srq(3)). After the kernel
// destroyed it, Destroy waits until every async event of the SRQ that was
// read has been acknowledged (async.Reader.Ack), as libibverbs does, but
// only until ctx ends: then it returns an *UnackedError naming the
// unacknowledged events (the SRQ is destroyed and its ring unmapped
// regardless). Destroy waits for uses of the SRQ in flight (a QP being
// created with it, a Modify or Query, posts) before it sends the command.
//
// The kernel refuses (EBUSY, errors.Is(err, unix.EBUSY)) to destroy an SRQ
// that QPs still use; the error says how many, and the SRQ stays usable.
// Destroying twice returns an error wrapping ErrClosed; a nil ctx is an
// error wrapping ErrInvalid.
func (srq *SRQ) Destroy(ctx context.Context) error {
	if srq == nil || srq.ctx == nil {
		return invalidErr("srq", "destroy", "nil SRQ")
	}
	return srq.destroy(ctx, srq.ctx, srq, "srq", func() (uint32, uint32, error) {
		resp, err := srq.destroyCmd()
		if err == nil {
			srq.pd.users.srq.Add(-1)
		}
		return resp.EventsReported, 0, busyErr(err, &srq.users)
	}, nil)
}

// Modify changes the SRQ's attributes selected by mask (ibv_modify_srq(3)):
// SRQAttrMaxWR resizes it to attr.MaxWR (on rxe the receive ring is then
// replaced and mapped anew), SRQAttrLimit arms the limit event at
// attr.Limit. It sends the write command MODIFY_SRQ with the provider's
// payload (rxe: where the kernel writes the resized ring's mmap
// information). A limit above the SRQ's size, or a size below the armed
// limit, is the kernel's EINVAL; a resize on a device without
// IBV_DEVICE_SRQ_RESIZE fails in the kernel too.
//
// A resize waits for every other use of the SRQ (posts, queries) to end
// and blocks new ones while it runs; arming the limit does not.
func (srq *SRQ) Modify(attr SRQAttr, mask SRQAttrMask) error {
	if srq == nil || srq.ctx == nil {
		return invalidErr("srq", "modify", "nil SRQ")
	}
	if mask&^srqAttrMaskAll != 0 {
		return invalidErr("srq", "modify", "unknown attribute mask bits %#x", uint32(mask&^srqAttrMaskAll))
	}
	if !attr.fits() || (mask&SRQAttrMaxWR != 0 && attr.MaxWR < 1) {
		return invalidErr("srq", "modify", "attributes out of range: %+v", attr)
	}
	if mask&SRQAttrMaxWR != 0 {
		srq.rw.Lock()
		defer srq.rw.Unlock()
		if srq.dead {
			return closedErr("srq", "modify")
		}
	} else {
		if !srq.hold() {
			return closedErr("srq", "modify")
		}
		defer srq.drop()
	}
	c := srq.ctx
	req := attr.encodeModify(srq.handle, mask)
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_MODIFY_SRQ, Req: sys.AsBytes(&req), UdataIn: srq.drv.modifyIn(mask)}
	if err := c.execWrite(&w, "srq", "modify"); err != nil {
		return err
	}
	return srq.drv.modified(c, mask)
}

// encodeModify builds the MODIFY_SRQ request: the fields selected by
// mask, the others zero.
func (attr SRQAttr) encodeModify(handle uint32, mask SRQAttrMask) abi.IbUverbsModifySrq {
	req := abi.IbUverbsModifySrq{SrqHandle: handle, AttrMask: uint32(mask)}
	if mask&SRQAttrMaxWR != 0 {
		req.MaxWr = uint32(attr.MaxWR)
	}
	if mask&SRQAttrLimit != 0 {
		req.SrqLimit = uint32(attr.Limit)
	}
	return req
}

// Query returns the SRQ's current attributes (ibv_query_srq(3)): MaxWR
// (after a resize, the new size), MaxSGE and the armed Limit (0 once the
// limit event fired). It sends the write command QUERY_SRQ.
func (srq *SRQ) Query() (SRQAttr, error) {
	if srq == nil || srq.ctx == nil {
		return SRQAttr{}, invalidErr("srq", "query", "nil SRQ")
	}
	if !srq.hold() {
		return SRQAttr{}, closedErr("srq", "query")
	}
	defer srq.drop()
	req := abi.IbUverbsQuerySrq{SrqHandle: srq.handle}
	var resp abi.IbUverbsQuerySrqResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_QUERY_SRQ, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	if err := srq.ctx.execWrite(&w, "srq", "query"); err != nil {
		return SRQAttr{}, err
	}
	return SRQAttr{MaxWR: int(resp.MaxWr), MaxSGE: int(resp.MaxSge), Limit: int(resp.SrqLimit)}, nil
}

// Attr returns the sizes the kernel reported at creation (at least those
// requested) and the limit given to CreateSRQ. Query reports the current
// values; on 6.1, whose rxe echoes the requested MaxWR at creation, it
// also reports the ring's actual (larger) size.
func (srq *SRQ) Attr() SRQAttr {
	if srq == nil {
		return SRQAttr{}
	}
	return srq.attr
}

// SRQN returns the SRQ number.
func (srq *SRQ) SRQN() uint32 {
	if srq == nil {
		return 0
	}
	return srq.srqn
}

// PD returns the protection domain the SRQ was created in.
func (srq *SRQ) PD() *PD {
	if srq == nil {
		return nil
	}
	return srq.pd
}

// Context returns the context the SRQ was created on.
func (srq *SRQ) Context() *Context {
	if srq == nil {
		return nil
	}
	return srq.ctx
}

// Handle returns the kernel's handle of the SRQ.
func (srq *SRQ) Handle() uint32 {
	if srq == nil {
		return 0
	}
	return srq.handle
}

// UserHandle returns the value the kernel echoes in the SRQ's events.
func (srq *SRQ) UserHandle() uint64 {
	if srq == nil {
		return 0
	}
	return srq.uh
}

// Kind returns ElementSRQ.
func (srq *SRQ) Kind() ElementKind { return ElementSRQ }
